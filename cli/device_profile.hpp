// Which hardware profile prices a run that executes on a device: the profile the user names
// (--profile), else a calibrated profile measured on this very device, else the device's
// datasheet entry in the catalog. Shared by the commands that measure (validate, run).
#pragma once
#include <string>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/run/backend.hpp"

namespace perfsim {

struct DeviceProfile {
  Hardware hardware;
  // How it was chosen, for report headers: "--profile h100-local",
  // "profiles/h100.lua (measured on this device)", "datasheet entry H100-SXM".
  std::string source;
};

// The --profile value that asks for the device's catalog (datasheet) entry even where a
// calibrated profile of the device exists.
inline constexpr const char* datasheet_profile = "datasheet";

// `profile` "datasheet": the catalog entry device.catalog_name. `profile` empty: search the
// profiles for one whose measured_on.device equals device.name (the newest measured_on.date
// wins), else the catalog entry device.catalog_name.
// A named profile that cannot be loaded throws ConfigError (load_profile's message).
[[nodiscard]] DeviceProfile resolve_device_profile(const DeviceInfo& device,
                                                   const std::string& profile,
                                                   const std::string& module_path = "");

// Profiles that can be found without naming them: profiles/*.lua files under the --module-path
// directories (':'-separated) and $PERFSIM_PATH, as paths, then the names of the profiles
// shipped in the stdlib. Files come first, so a local profile wins a tie with a shipped one.
[[nodiscard]] std::vector<std::string> discoverable_profiles(const std::string& module_path);

}  // namespace perfsim
