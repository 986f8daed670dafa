// Choosing the profile that prices a measured run: --profile, a calibrated profile of this
// device, or the datasheet entry of the device's catalog name.
#include "cli/device_profile.hpp"

#include <exception>
#include <optional>

#include <fmt/format.h>

#include "dsl/dsl.hpp"

namespace perfsim {

std::vector<std::string> discoverable_profiles(const std::string& module_path) {
  std::vector<std::string> out;
  for (ProfileSource& s : profile_sources(module_path)) out.push_back(s.path.empty() ? std::move(s.name) : std::move(s.path));
  return out;
}

DeviceProfile resolve_device_profile(const DeviceInfo& device, const std::string& profile,
                                     const std::string& module_path) {
  if (profile == datasheet_profile)
    return {find_hardware(device.catalog_name, module_path),
            fmt::format("--profile {}: catalog entry {}", datasheet_profile, device.catalog_name)};
  if (!profile.empty()) return {load_profile(profile, module_path), "--profile " + profile};

  std::optional<DeviceProfile> best;
  for (const std::string& candidate : discoverable_profiles(module_path)) {
    Hardware hw;
    try {
      hw = load_profile(candidate, module_path);
    } catch (const std::exception&) {
      // A profile that does not load is reported when it is named; here it is no match.
      continue;
    }
    const Provenance& p = hw.calibration.measured_on;
    if (!hw.calibrated || p.device.empty() || p.device != device.name) continue;
    // Several profiles of this device: the most recently measured one (ISO dates sort).
    if (best && best->hardware.calibration.measured_on.date >= p.date) continue;
    best = DeviceProfile{std::move(hw), fmt::format("{} (calibrated on this device)", candidate)};
  }
  if (best) return *best;
  return {find_hardware(device.catalog_name, module_path),
          fmt::format("datasheet entry {} (no calibrated profile of this device was found; "
                      "`perfsim calibrate` writes one)",
                      device.catalog_name)};
}

}  // namespace perfsim
