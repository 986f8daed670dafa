// Choosing the profile that prices a measured run: --profile, a calibrated profile of this
// device, or the datasheet entry of the device's catalog name.
#include "cli/device_profile.hpp"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "dsl/dsl.hpp"
#include "dsl/stdlib_files.hpp"

namespace perfsim {

namespace {

constexpr std::string_view embedded_prefix = "profiles.";

std::vector<std::string> split_path_list(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t colon = std::min(list.find(':', start), list.size());
    if (colon > start) out.push_back(list.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> discoverable_profiles(const std::string& module_path) {
  std::vector<std::string> dirs = split_path_list(module_path);
  if (const char* env = std::getenv("PERFSIM_PATH"))
    for (std::string& d : split_path_list(env)) dirs.push_back(std::move(d));

  std::vector<std::string> out;
  for (const std::string& dir : dirs) {
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir + "/profiles", ec))
      if (e.path().extension() == ".lua" && e.is_regular_file(ec)) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  for (const EmbeddedFile& f : stdlib_files())
    if (f.name.substr(0, embedded_prefix.size()) == embedded_prefix)
      out.emplace_back(f.name.substr(embedded_prefix.size()));
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
