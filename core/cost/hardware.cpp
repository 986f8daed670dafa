#include "core/cost/hardware.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/errors.hpp"

namespace perfsim {

namespace {
double lookup(const std::map<OpClass, double>& table, OpClass c, double fallback) {
  auto it = table.find(c);
  return it == table.end() ? fallback : it->second;
}

// Checks of one profile's numbers; every message names the profile (`where`) and the field.
struct NumberCheck {
  const std::string& where;

  void finite(double v, const std::string& field, bool positive) const {
    if (!std::isfinite(v) || v < 0 || (positive && v == 0))
      throw ConfigError(fmt::format("{}: {} must be a finite number {} (got {})", where, field,
                                    positive ? "> 0" : ">= 0", std::isnan(v) ? "nan" : fmt::format("{}", v)));
  }
  void at_least_zero(double v, const std::string& field) const { finite(v, field, false); }
  void above_zero(double v, const std::string& field) const { finite(v, field, true); }
  void list(const std::vector<double>& v, const std::string& field, bool positive) const {
    for (std::size_t i = 0; i < v.size(); ++i) finite(v[i], fmt::format("{}[{}]", field, i + 1), positive);
  }
};
}  // namespace

// Without a table entry an op class is assumed to reach the full datasheet figure,
// so a missing entry is visible as an optimistic prediction rather than hidden.
double Hardware::compute_eff(OpClass c) const { return lookup(compute_efficiency, c, 1.0); }
double Hardware::memory_eff(OpClass c) const { return lookup(memory_efficiency, c, 1.0); }

void validate_numbers(const Hardware& hw, const std::string& where) {
  const NumberCheck c{where};
  for (DType t : all_dtypes) c.at_least_zero(hw.peak(t), fmt::format("peak_flops.{}", name_of(t)));
  c.at_least_zero(hw.memory_bytes, "memory_bytes");
  c.above_zero(hw.memory_bandwidth, "memory_bandwidth");
  c.at_least_zero(hw.l2_bytes, "l2_bytes");
  c.at_least_zero(hw.launch_eager, "launch_eager");
  c.at_least_zero(hw.launch_graph, "launch_graph");
  c.at_least_zero(hw.launch_wait, "launch_wait");
  c.at_least_zero(hw.dispatch_eager, "dispatch_eager");
  for (const auto& [k, v] : hw.dispatch_by_kind) c.at_least_zero(v, fmt::format("dispatch.{}", name_of(k)));
  for (const auto& [k, v] : hw.dispatch_fixed_by_kind)
    c.at_least_zero(v, fmt::format("dispatch_fixed.{}", name_of(k)));
  c.at_least_zero(hw.host_overhead, "host_overhead");
  c.at_least_zero(hw.engine_host_per_op, "engine_host_per_op");
  c.at_least_zero(hw.engine_host_per_step, "engine_host_per_step");
  c.at_least_zero(hw.host_copy_bandwidth, "host_copy_bandwidth");
  if (!(hw.sparse_speedup >= 1))
    throw ConfigError(fmt::format("{}: sparse_speedup must be >= 1 (1: no sparse tensor cores; got {})", where,
                                  hw.sparse_speedup));
  for (const auto& [field, link] : {std::pair<const char*, const Link*>{"nvlink", &hw.nvlink},
                                    {"pcie", &hw.pcie},
                                    {"infiniband", &hw.infiniband}}) {
    c.at_least_zero(link->bandwidth, fmt::format("{}.bandwidth", field));
    c.at_least_zero(link->latency, fmt::format("{}.latency", field));
  }
  if (hw.sm_count < 0 || hw.collective_sms < 0 || hw.gpus_per_node < 0)
    throw ConfigError(fmt::format("{}: sm_count, collective_sms and gpus_per_node must be >= 0", where));
  for (const auto& [k, v] : hw.compute_efficiency)
    c.above_zero(v, fmt::format("compute_efficiency.{}", name_of(k)));
  for (const auto& [k, v] : hw.memory_efficiency)
    c.above_zero(v, fmt::format("memory_efficiency.{}", name_of(k)));
  const Calibration& cal = hw.calibration;
  for (const auto& [key, curve] : cal.kernels) {
    c.list(curve.seconds, fmt::format("kernels[\"{}\"].seconds", key), true);
    c.list(curve.efficiency, fmt::format("kernels[\"{}\"].efficiency", key), true);
  }
  for (const auto& [dtype, table] : cal.gemm) {
    const std::string field = fmt::format("gemm.{}", name_of(dtype));
    c.list(table.m, field + ".m", true);
    c.list(table.n, field + ".n", true);
    c.list(table.k, field + ".k", true);
    c.list(table.efficiency, field + ".efficiency", true);
  }
  for (const auto& [key, fit] : cal.collectives) {
    const std::string field = fmt::format("collectives.{}[{}]", name_of(key.first), key.second);
    c.at_least_zero(fit.latency, field + ".latency");
    c.at_least_zero(fit.bandwidth, field + ".bandwidth");
    c.list(fit.payload, field + ".bytes", false);
    c.list(fit.seconds, field + ".seconds", false);
  }
}

}  // namespace perfsim
