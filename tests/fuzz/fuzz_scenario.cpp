// libFuzzer target: script text → scenario → prediction. The input is run as a scenario file
// under the sandbox with a short timeout (0.5 s), nothing executed or searched (perfsim.measure
// and perfsim.search refused); its first 8 sweep points are predicted. Seeds: scenarios/,
// examples/, tests/ (scripts/fuzz.sh).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/run/runner.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace perfsim;
  const std::string& path = fuzz::input_path(".lua");
  fuzz::write_input(path, data, size);
  DslSettings settings;
  settings.timeout_s = 0.5;
  settings.memory_limit = std::size_t{256} << 20;
  settings.measure_and_search_allowed = false;
  fuzz::expect_clean([&] {
    const ScriptOutcome out = run_script(path, settings);
    RunnerHooks hooks;
    hooks.find_layouts_that_fit = false;  // a search per point would dominate the run
    // A few points: a sweep of thousands would spend the run predicting alike rows.
    const std::size_t points = std::min<std::size_t>(out.points.size(), 8);
    for (std::size_t i = 0; i < points; ++i) (void)run_scenario(out.points[i].scenario, nullptr, nullptr, hooks);
  });
  return 0;
}
