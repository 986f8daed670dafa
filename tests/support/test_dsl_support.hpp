// Helpers shared by the DSL tests: fixture paths, throw-away scripts, captured error text.
#pragma once
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/errors.hpp"
#include "dsl/dsl.hpp"

namespace perfsim::test {

inline std::string dsl_fixture(const std::string& name) {
  return std::string(PERFSIM_SOURCE_DIR) + "/tests/dsl/" + name;
}

inline std::filesystem::path script_dir() {
  return std::filesystem::temp_directory_path() / ("perfsim_dsl_" + std::to_string(::getpid()));
}

// Removes the throw-away scripts when the test program exits.
struct ScriptDirCleanup {
  ~ScriptDirCleanup() {
    std::error_code ec;
    std::filesystem::remove_all(script_dir(), ec);
  }
};
inline const ScriptDirCleanup script_dir_cleanup;

// Writes `text` to <tmp>/perfsim_dsl_<pid>/<name> and returns the path; line 1 is the first line.
inline std::string write_script(const std::string& name, const std::string& text) {
  const auto dir = script_dir();
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

// The message of the ScriptError run_script throws ("" and a failed check when none).
inline std::string script_error(const std::string& path, const DslSettings& settings = {}) {
  try {
    (void)run_script(path, settings);
  } catch (const ScriptError& e) {
    return e.what();
  }
  FAIL_CHECK("expected a ScriptError from " << path);
  return "";
}

// The message of the ConfigError run_script throws.
inline std::string config_error(const std::string& path, const DslSettings& settings = {}) {
  try {
    (void)run_script(path, settings);
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL_CHECK("expected a ConfigError from " << path);
  return "";
}

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace perfsim::test
