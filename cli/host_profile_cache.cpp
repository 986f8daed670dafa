// First-use host calibration: the quick CPU calibration plan (core/calibrate/plan.cpp), fitted
// over the host-cpu catalog entry, written to the cache whole or not at all.
#include "cli/host_profile_cache.hpp"

#include <cctype>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <fmt/format.h>

#include "cli/host_load.hpp"
#include "cli/progress.hpp"
#include "core/calibrate/calibrate.hpp"
#include "core/errors.hpp"
#include "core/files.hpp"
#include "core/kernel_fingerprint.hpp"
#include "core/text.hpp"
#include "core/version.hpp"
#include "dsl/dsl.hpp"

namespace perfsim {

namespace {

namespace fs = std::filesystem;

// The name the cached profile goes by in report headers.
constexpr const char* cached_profile_name = "host-cpu-cached";
// Raised whenever the quick CPU plan changes what it measures, so that profiles cached from an
// earlier plan are measured again (core/calibrate/plan.cpp).
constexpr int quick_plan_revision = 2;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// "AMD EPYC 7B13 (2 threads)" -> "amd-epyc-7b13-2-threads".
std::string slug(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 && u < 128) {
      out += static_cast<char>(std::tolower(u));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "unknown" : out;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "~/.cache/perfsim/…" for status lines.
std::string shown(const std::string& path) {
  const std::string home = env("HOME");
  if (home.empty() || path.size() <= home.size() || path.compare(0, home.size(), home) != 0 ||
      path[home.size()] != '/')
    return path;
  std::string out(1, '~');
  out.append(path, home.size(), std::string::npos);
  return out;
}

}  // namespace

std::string cache_dir() {
  // The XDG base directory specification ignores a relative XDG_CACHE_HOME.
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg.front() == '/') return xdg + "/perfsim";
  if (const std::string home = env("HOME"); !home.empty()) return home + "/.cache/perfsim";
  return "";
}

bool cache_disabled_by_env() {
  const std::string v = env("PERFSIM_NO_CACHE");
  return !v.empty() && v != "0";
}

std::string host_profile_path(const std::string& dir, const std::string& device) {
  return (fs::path(dir) / ("cpu-" + slug(device) + ".lua")).string();
}

std::string host_profile_stamp(const std::string& device) {
  return fmt::format("-- perfsim {} host calibration (quick plan r{}) of {}, cpu kernels {}", perfsim_version,
                     quick_plan_revision, device, kernel_fingerprint("cpu"));
}

std::optional<Hardware> read_host_profile(const std::string& path, const std::string& device) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  if (first_line(path) != host_profile_stamp(device)) return std::nullopt;
  try {
    Hardware hw = load_profile(path);
    if (!hw.calibrated || hw.calibration.measured_on.device != device) return std::nullopt;
    return hw;
  } catch (const std::exception&) {
    // A damaged cache file is measured again, not an error.
    return std::nullopt;
  }
}

std::string host_profile_text(const Hardware& hw, const std::string& device) {
  return host_profile_stamp(device) + "\n" + profile_to_lua(hw);
}

std::optional<Hardware> cached_host_profile(Backend& cpu, const HostProfileOptions& o) {
  if (cache_disabled_by_env()) return std::nullopt;
  const std::string dir = cache_dir();
  if (dir.empty()) return std::nullopt;
  const DeviceInfo device = cpu.device();
  const std::string path = host_profile_path(dir, device.name);
  if (std::optional<Hardware> hw = read_host_profile(path, device.name)) return hw;

  if (!o.quiet)
    fmt::print(stderr,
               "perfsim: no calibrated profile of this CPU ({}): measuring one now, once (seconds; kept in {}; "
               "--no-cache or PERFSIM_NO_CACHE=1 prices from estimates instead)\n",
               device.name, shown(path));
  CalibrateOptions co;
  co.quick = true;
  co.name = cached_profile_name;
  ProgressLine line("calibrate", progress_enabled(o.quiet));
  if (line.enabled())
    co.progress = [&line](const CalibrateProgress& p) {
      const double fraction = p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(p.total) : 0.0;
      line.update(fmt::format("{} {}/{}", p.sweep, p.done, p.total), fraction, p.sweep_seconds);
    };
  CalibrateResult r;
  try {
    r = calibrate(cpu, find_hardware(device.catalog_name, o.module_path), co);
  } catch (const std::exception& e) {
    line.clear();
    if (!o.quiet) fmt::print(stderr, "perfsim: warning: this CPU could not be calibrated ({}): priced from estimates\n", e.what());
    return std::nullopt;
  }
  line.clear();
  const std::optional<double> after = sample_busy_share();
  if (o.busy || (after && *after > busy_machine_share)) {
    if (!o.quiet)
      fmt::print(stderr,
                 "perfsim: calibrated this CPU in {:.0f} s while other work kept it busy: not kept, the next run "
                 "measures again\n",
                 r.wall_seconds);
    return r.hw;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  try {
    if (ec) throw ConfigError(ec.message());
    write_file_atomically(path, host_profile_text(r.hw, device.name));
    if (!o.quiet) fmt::print(stderr, "perfsim: calibrated this CPU in {:.0f} s: {}\n", r.wall_seconds, shown(path));
  } catch (const std::exception& e) {
    if (!o.quiet)
      fmt::print(stderr, "perfsim: warning: cannot keep the calibration in {} ({}): it prices this run only\n",
                 shown(dir), e.what());
  }
  return r.hw;
}

}  // namespace perfsim
