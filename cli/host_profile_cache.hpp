// The calibrated profile of this CPU that `perfsim run` prices CPU runs with when none was
// given or found: a short calibration of this machine (seconds), measured on first use and
// kept in the user's cache, one file per CPU model and thread count. An estimate from
// /proc/cpuinfo alone misses a CPU's real GEMM and memory rates by tens of percent.
//
// Only the cache folder is ever written: $XDG_CACHE_HOME/perfsim, else ~/.cache/perfsim.
// PERFSIM_NO_CACHE=1 (or `run --no-cache`) neither reads nor writes it: the run is then
// priced from the /proc estimate. A cached profile written by another perfsim version, for
// other CPU kernels (core/kernel_fingerprint.hpp) or another device is ignored and measured
// again.
#pragma once
#include <optional>
#include <string>

#include "core/cost/hardware.hpp"
#include "core/run/backend.hpp"

namespace perfsim {

// The cache folder: $XDG_CACHE_HOME/perfsim when XDG_CACHE_HOME is an absolute path, else
// $HOME/.cache/perfsim; "" when neither is set (no cache).
[[nodiscard]] std::string cache_dir();

// Whether PERFSIM_NO_CACHE is set to anything but "" or "0".
[[nodiscard]] bool cache_disabled_by_env();

// The file of device `device` in `dir`: dir/cpu-<device name as a slug>.lua.
[[nodiscard]] std::string host_profile_path(const std::string& dir, const std::string& device);

// The first line of a cached profile: what it was measured with. A file whose first line
// differs was written by another perfsim or for other kernels.
[[nodiscard]] std::string host_profile_stamp(const std::string& device);

// The cached profile at `path` when it exists, carries this build's stamp for `device`, loads
// and is calibrated on `device`; nullopt otherwise (never throws for a bad file).
[[nodiscard]] std::optional<Hardware> read_host_profile(const std::string& path, const std::string& device);

// The file text of `hw` as cached for `device`: the stamp, then the profile's Lua.
[[nodiscard]] std::string host_profile_text(const Hardware& hw, const std::string& device);

struct HostProfileOptions {
  bool quiet = false;          // no status lines on stderr
  std::string module_path;     // where the device's catalog entry is looked up
  bool busy = false;           // other work kept the machine busy just before (cli/host_load.hpp)
};

// The cached calibrated profile of the CPU `cpu` runs on, or one measured now (a quick
// calibration) and cached; nullopt when the cache is disabled, or the calibration cannot run
// (with a warning on stderr). A calibration measured while other work kept the machine busy
// (before it, o.busy, or just after it) prices this run only: kept, it would misprice every
// later run on a quiet machine.
[[nodiscard]] std::optional<Hardware> cached_host_profile(Backend& cpu, const HostProfileOptions& o);

}  // namespace perfsim
