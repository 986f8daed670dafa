// libFuzzer target: the files a serve{} workload names → requests (read_trace, JSONL or CSV by
// extension) and token counts (read_lengths). The first input byte picks the reader and the
// extension; the rest is the file. Seeds: tests/cli/serve and tests/dsl traces and lengths
// (scripts/fuzz.sh). The readers hold their files to max_input_file_bytes, so an input is at
// most 64 KiB of parsing; one that takes over 5 s is a finding.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/serve/traffic.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace perfsim;
  if (size == 0) return 0;
  const auto start = std::chrono::steady_clock::now();
  const int kind = data[0] % 3;
  static const char* const suffixes[] = {".jsonl", ".csv", ".txt"};
  const std::string& path = fuzz::input_path(suffixes[kind]);
  fuzz::write_input(path, data + 1, size - 1);
  fuzz::expect_clean([&] {
    if (kind == 2)
      (void)read_lengths(path);
    else
      (void)read_trace(path);
  });
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (took > 5) {
    std::fprintf(stderr, "fuzz finding: slow input: it took %.1f s, over the harness's bound of 5 s\n", took);
    std::abort();
  }
  return 0;
}
