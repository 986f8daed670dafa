// libFuzzer target: profile text → hardware (load_profile, as `--profile FILE` reads it).
// Seeds: stdlib/profiles and tests/cli profiles (scripts/fuzz.sh). A profile is data: its
// reader stops it after 10 s (dsl/fresh_state.hpp); the harness holds it to 1 s and fails an
// input that takes longer than 5 s, with its time (scripts/fuzz.sh names the input).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/deadline.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace perfsim;
  const auto start = std::chrono::steady_clock::now();
  const std::string& path = fuzz::input_path(".lua");
  fuzz::write_input(path, data, size);
  {
    const DeadlineScope limit(1.0, "the profile ran longer than the harness's 1 s");
    fuzz::expect_clean([&] { (void)load_profile(path); });
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (took > 5) {
    std::fprintf(stderr, "fuzz finding: slow input: it took %.1f s, over the harness's bound of 5 s\n", took);
    std::abort();
  }
  return 0;
}
