#include "core/cost/transfer.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace perfsim {

Hardware transfer_profile(const Hardware& from, const Hardware& to) {
  if (!from.calibrated)
    throw ConfigError(fmt::format("profile '{}' is not calibrated: only a calibrated profile's measured "
                                  "efficiencies carry to other hardware (use the catalog entry '{}' itself)",
                                  from.name, to.name));
  if (from.kind != to.kind)
    throw ConfigError(fmt::format("cannot carry the {} profile '{}' to the {} '{}'", from.kind, from.name, to.kind,
                                  to.name));
  Hardware h = from;
  h.name = from.name + "@" + to.name;
  h.base = to.name;
  // What the GPU is: the target's datasheet.
  h.peak_flops = to.peak_flops;
  h.memory_bytes = to.memory_bytes;
  h.memory_bandwidth = to.memory_bandwidth;
  h.l2_bytes = to.l2_bytes;
  h.sm_count = to.sm_count;
  h.collective_sms = to.collective_sms;
  h.nvlink = to.nvlink;
  h.pcie = to.pcie;
  h.infiniband = to.infiniband;
  h.gpus_per_node = to.gpus_per_node;
  h.price_per_hour = to.price_per_hour;
  const std::string measured = from.calibration.measured_on.device.empty()
                                   ? std::string()
                                   : fmt::format(", measured on {}", from.calibration.measured_on.device);
  h.source = fmt::format("{}'s fitted efficiencies{} on {}'s datasheet ({})", from.name, measured, to.name,
                         to.source.empty() ? "catalog entry" : to.source);
  return h;
}

}  // namespace perfsim
