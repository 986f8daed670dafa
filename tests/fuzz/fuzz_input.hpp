// Shared by the fuzz targets: the input bytes as a file (the loaders read
// files, as the CLI does), and the rule for what counts as a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "dsl/dsl.hpp"

namespace perfsim::fuzz {

// A file holding one input, rewritten for each; one per process (libFuzzer
// forks per job).
inline const std::string& input_path(const char* suffix) {
  static const std::string path = [suffix] {
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp != nullptr ? tmp : "/tmp") + "/perfsim_fuzz_" + std::to_string(getpid()) + suffix;
  }();
  return path;
}

inline void write_input(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

// perfsim's own errors are the answer to bad input (the CLI prints them on one
// line). Any other exception would reach a user as a library's message ("stoi",
// "vector::_M_range_check"): a finding, so abort and let libFuzzer keep the
// input.
template <class Fn>
void expect_clean(Fn&& fn) {
  try {
    fn();
  } catch (const ScriptError&) {
  } catch (const ConfigError&) {
  } catch (const NotExecutable&) {
  } catch (const TimeLimitError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz finding: exception outside perfsim's error types: %s\n", e.what());
    std::abort();
  }
}

}  // namespace perfsim::fuzz
