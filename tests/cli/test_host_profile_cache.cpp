// The first-use CPU calibration's cache: where it lives, how a file is named, and which cached
// files are taken (this perfsim, these kernels, this device) and which are measured again.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "cli/host_profile_cache.hpp"
#include "dsl/dsl.hpp"

using namespace perfsim;

namespace {

namespace fs = std::filesystem;

// Sets an environment variable for the scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) m_old = old, m_had = true;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (m_had) ::setenv(m_name, m_old.c_str(), 1);
    else ::unsetenv(m_name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* m_name;
  std::string m_old;
  bool m_had = false;
};

void write(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// A calibrated profile as measured on `device`.
Hardware calibrated_on(const std::string& device) {
  Hardware hw = load_profile("h100-local");
  hw.calibration.measured_on.device = device;
  return hw;
}

}  // namespace

TEST_CASE("host profile cache: XDG_CACHE_HOME when absolute, else ~/.cache") {
  const ScopedEnv home("HOME", "/home/u");
  {
    const ScopedEnv xdg("XDG_CACHE_HOME", "/var/cache/u");
    CHECK(cache_dir() == "/var/cache/u/perfsim");
  }
  {
    const ScopedEnv xdg("XDG_CACHE_HOME", "relative/cache");  // ignored, as the XDG specification says
    CHECK(cache_dir() == "/home/u/.cache/perfsim");
  }
  const ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  CHECK(cache_dir() == "/home/u/.cache/perfsim");
  const ScopedEnv no_home("HOME", nullptr);
  CHECK(cache_dir().empty());
}

TEST_CASE("host profile cache: PERFSIM_NO_CACHE turns it off unless empty or 0") {
  {
    const ScopedEnv off("PERFSIM_NO_CACHE", "1");
    CHECK(cache_disabled_by_env());
  }
  {
    const ScopedEnv on("PERFSIM_NO_CACHE", "0");
    CHECK_FALSE(cache_disabled_by_env());
  }
  const ScopedEnv unset("PERFSIM_NO_CACHE", nullptr);
  CHECK_FALSE(cache_disabled_by_env());
}

TEST_CASE("host profile cache: one file per CPU model and thread count") {
  CHECK(host_profile_path("/c/perfsim", "AMD EPYC 7B13 (2 threads)") == "/c/perfsim/cpu-amd-epyc-7b13-2-threads.lua");
  CHECK(host_profile_path("/c", "Intel(R) Xeon(R) @ 2.20GHz (1 thread)") == "/c/cpu-intel-r-xeon-r-2-20ghz-1-thread.lua");
}

TEST_CASE("host profile cache: a file of this perfsim, these kernels and this device is taken; others are not") {
  const fs::path dir = fs::temp_directory_path() / fs::path("perfsim-cache-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string device = "Test CPU (2 threads)";
  const fs::path file = dir / "cpu.lua";

  write(file, host_profile_text(calibrated_on(device), device));
  const std::optional<Hardware> taken = read_host_profile(file.string(), device);
  REQUIRE(taken.has_value());
  CHECK(taken->calibrated);
  CHECK(taken->calibration.measured_on.device == device);

  // Another device with the same name slug, or the file of another CPU: measured again.
  CHECK_FALSE(read_host_profile(file.string(), "Test CPU (4 threads)").has_value());
  // Written by another perfsim version (or for other kernels): the stamp differs.
  const std::string text = host_profile_text(calibrated_on(device), device);
  write(file, "-- perfsim 0.0.1 host calibration (quick plan r2) of " + device + ", cpu kernels 000000000000" +
                  text.substr(text.find('\n')));
  CHECK_FALSE(read_host_profile(file.string(), device).has_value());
  // Stamped right but measured on another device, or damaged: measured again.
  write(file, host_profile_stamp(device) + "\n" + host_profile_text(calibrated_on("Other CPU"), "Other CPU"));
  CHECK_FALSE(read_host_profile(file.string(), device).has_value());
  write(file, host_profile_stamp(device) + "\nreturn profile {");
  CHECK_FALSE(read_host_profile(file.string(), device).has_value());
  CHECK_FALSE(read_host_profile((dir / "missing.lua").string(), device).has_value());
  fs::remove_all(dir);
}
