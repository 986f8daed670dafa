// libFuzzer target: profile text → hardware (load_profile, as `--profile FILE`
// reads it). Seeds: stdlib/profiles and tests/cli profiles (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>

#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace perfsim;
  const std::string& path = fuzz::input_path(".lua");
  fuzz::write_input(path, data, size);
  fuzz::expect_clean([&] { (void)load_profile(path); });
  return 0;
}
