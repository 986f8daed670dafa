// libFuzzer target: script text → scenario → prediction. The input runs as a scenario file
// under the sandbox, nothing executed or searched (perfsim.measure, perfsim.search and
// perfsim.capacity refused); then the harness predicts a few of its sweep points itself.
// Seeds: scenarios/, examples/, tests/ (scripts/fuzz.sh).
//
// The work one input may ask for is bounded, so that neither a seed nor a mutant comes near
// libFuzzer's -timeout under ASan+UBSan on two busy cores:
//   - the script, and every prediction it asks for (perfsim.predict), stops after 0.5 s of
//     wall time (the DSL's --timeout, which the engine, stack, sweep and search loops check);
//   - the harness predicts at most 4 sweep points, each with at most 4 stack steps, serving at
//     most 64 requests, with no layout search, and stops them after 2 s;
//   - nothing is executed (no backend), so no layer runs.
// An input that still takes longer than 5 s is a finding: the harness aborts with its time
// (scripts/fuzz.sh names the input).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/deadline.hpp"
#include "core/run/runner.hpp"
#include "fuzz_input.hpp"

namespace {

constexpr double script_seconds = 0.5;
constexpr std::size_t max_points = 4;
constexpr std::size_t max_stack_steps = 4;
constexpr int64_t max_requests = 64;
constexpr double predict_seconds = 2;
constexpr double input_seconds = 5;

// The point's scenario cut down to the harness's bounds.
perfsim::Scenario bounded(perfsim::Scenario s) {
  if (s.stacks.size() > max_stack_steps) s.stacks.resize(max_stack_steps);
  if (s.serve) s.serve->requests = std::min(s.serve->requests, max_requests);
  s.execute.enabled = false;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace perfsim;
  const auto start = std::chrono::steady_clock::now();
  const std::string& path = fuzz::input_path(".lua");
  fuzz::write_input(path, data, size);
  DslSettings settings;
  settings.timeout_s = script_seconds;
  settings.memory_limit = std::size_t{256} << 20;
  settings.measure_and_search_allowed = false;
  fuzz::expect_clean([&] {
    const ScriptOutcome out = run_script(path, settings);
    const DeadlineScope limit(predict_seconds, "the harness's predictions ran longer than 2 s");
    RunnerHooks hooks;
    hooks.find_layouts_that_fit = false;
    const std::size_t points = std::min(out.points.size(), max_points);
    for (std::size_t i = 0; i < points; ++i)
      (void)run_scenario(bounded(out.points[i].scenario), nullptr, nullptr, hooks);
  });
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (took > input_seconds) {
    std::fprintf(stderr, "fuzz finding: slow input: it took %.1f s, over the harness's bound of %.0f s\n",
                 took, input_seconds);
    std::abort();
  }
  return 0;
}
