// Lua tables <-> Hardware: datasheet peaks per dtype, memory, links and the per-class
// efficiency tables. Nested tables merge into the base when used as overrides.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "core/errors.hpp"
#include "core/text.hpp"
#include "dsl/lua_calibration.hpp"
#include "dsl/lua_convert.hpp"
#include "dsl/lua_fields.hpp"

namespace perfsim::dsl {

namespace {

std::vector<std::string> dtype_names() {
  std::vector<std::string> out;
  for (DType t : all_dtypes) out.emplace_back(name_of(t));
  return out;
}

std::vector<std::string> class_names() {
  std::vector<std::string> out;
  for (OpClass c : all_op_classes) out.emplace_back(name_of(c));
  return out;
}

void read_peaks(lua_State* L, int index, Hardware& hw, const std::string& what) {
  const FieldReader r(L, index, what + " peak_flops", dtype_names());
  for (DType t : all_dtypes) {
    const std::string key(name_of(t));
    if (auto v = r.number(key.c_str())) {
      if (*v < 0)
        throw ConfigError(fmt::format("{}: peak_flops.{} must be >= 0 (0 = unsupported; got {})",
                                      what, key, format_number(*v)));
      hw.peak_flops[static_cast<std::size_t>(t)] = *v;
    }
  }
}

void read_efficiency(lua_State* L, int index, std::map<OpClass, double>& table,
                     const std::string& what, const char* field) {
  const FieldReader r(L, index, fmt::format("{} {}", what, field), class_names());
  for (OpClass c : all_op_classes) {
    const std::string key(name_of(c));
    if (auto v = r.number(key.c_str())) {
      // Above 1 only in fitted profiles, where data served from cache beats the datasheet.
      if (*v <= 0 || *v > 10)
        throw ConfigError(fmt::format("{}: {}.{} must be a fraction of peak in (0, 10] (got {})",
                                      what, field, key, format_number(*v)));
      table[c] = *v;
    }
  }
}

void read_link(lua_State* L, int index, Link& link, const std::string& what, const char* field) {
  const FieldReader r(L, index, fmt::format("{} {}", what, field), {"bandwidth", "latency"});
  r.read("bandwidth", link.bandwidth);
  r.read("latency", link.latency);
  if (link.bandwidth < 0 || link.latency < 0)
    throw ConfigError(fmt::format("{}: {}.bandwidth and {}.latency must be >= 0", what, field, field));
}

// dispatch = {gemm = 14e-6, rmsnorm = 8e-6, ...}: host seconds per kernel an op of each kind
// launches; dispatch_fixed, the same shape: host seconds per op on top.
void read_dispatch(lua_State* L, int index, std::map<OpKind, double>& table, const std::string& what,
                   const char* field) {
  index = abs_index(L, index);
  for (const std::string& key : string_keys(L, index)) {
    const std::optional<OpKind> k = parse_op_kind(key);
    if (!k)
      throw ConfigError(fmt::format("{}: {}.{} is not an op kind (e.g. gemm, rmsnorm, flash_attention)", what,
                                    field, key));
    lua_getfield(L, index, key.c_str());
    if (lua_type(L, -1) != LUA_TNUMBER || lua_tonumber(L, -1) < 0)
      throw ConfigError(
          fmt::format("{}: {}.{} must be seconds >= 0 (got {})", what, field, key, describe_value(L, -1)));
    table[*k] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
}

void push_link(lua_State* L, const char* key, const Link& link) {
  lua_createtable(L, 0, 2);
  set_number(L, "bandwidth", link.bandwidth);
  set_number(L, "latency", link.latency);
  lua_setfield(L, -2, key);
}

void push_efficiency(lua_State* L, const char* key, const std::map<OpClass, double>& table) {
  lua_createtable(L, 0, static_cast<int>(table.size()));
  for (const auto& [c, v] : table) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, std::string(name_of(c)).c_str());
  }
  lua_setfield(L, -2, key);
}

const ScalarFields<Hardware>& hardware_scalars() {
  static const ScalarFields<Hardware> f = {
      {"name", &Hardware::name},
      {"kind", &Hardware::kind},
      {"memory_bytes", &Hardware::memory_bytes},
      {"memory_bandwidth", &Hardware::memory_bandwidth},
      {"l2_bytes", &Hardware::l2_bytes},
      {"sm_count", &Hardware::sm_count},
      {"collective_sms", &Hardware::collective_sms},
      {"gpus_per_node", &Hardware::gpus_per_node},
      {"launch_eager", &Hardware::launch_eager},
      {"launch_graph", &Hardware::launch_graph},
      {"launch_wait", &Hardware::launch_wait},
      {"host_overhead", &Hardware::host_overhead},
      {"engine_host_per_op", &Hardware::engine_host_per_op},
      {"engine_host_per_step", &Hardware::engine_host_per_step},
      {"host_copy_bandwidth", &Hardware::host_copy_bandwidth},
      {"dispatch_eager", &Hardware::dispatch_eager},
      {"calibrated", &Hardware::calibrated},
      {"base", &Hardware::base},
      {"source", &Hardware::source},
      {"price_per_hour", &Hardware::price_per_hour},
      {"sparse_speedup", &Hardware::sparse_speedup}};
  return f;
}

const std::pair<const char*, Link Hardware::*> hardware_links[] = {
    {"nvlink", &Hardware::nvlink}, {"pcie", &Hardware::pcie}, {"infiniband", &Hardware::infiniband}};

}  // namespace

const std::vector<std::string>& hardware_fields() {
  static const std::vector<std::string> f = [] {
    std::vector<std::string> keys = hardware_scalars().keys();
    keys.insert(keys.end(), {"peak_flops", "dispatch", "dispatch_fixed", "compute_efficiency",
                             "memory_efficiency", "aliases", "measured", "gemm", "kernels", "collectives"});
    for (const auto& [key, link] : hardware_links) keys.emplace_back(key);
    return keys;
  }();
  return f;
}

void read_hardware_fields(lua_State* L, int index, Hardware& hw, const std::string& what) {
  const FieldReader r(L, index, what, hardware_fields());
  hardware_scalars().read(r, hw);
  if (hw.kind != "gpu" && hw.kind != "cpu")
    throw ConfigError(fmt::format("{}: kind must be \"gpu\" or \"cpu\" (got '{}')", what, hw.kind));
  if (hw.gpus_per_node < 0) throw ConfigError(fmt::format("{}: gpus_per_node must be >= 0 (0 = unknown)", what));
  if (hw.collective_sms < 0 || (hw.sm_count > 0 && hw.collective_sms >= hw.sm_count))
    throw ConfigError(fmt::format("{}: collective_sms must be >= 0 and below sm_count ({}; got {})", what,
                                  hw.sm_count, hw.collective_sms));
  if (hw.launch_wait < 0) throw ConfigError(fmt::format("{}: launch_wait must be >= 0", what));
  if (hw.dispatch_eager < 0) throw ConfigError(fmt::format("{}: dispatch_eager must be >= 0", what));
  if (!(hw.price_per_hour >= 0))
    throw ConfigError(fmt::format("{}: price_per_hour must be >= 0 USD per GPU-hour (0 = unknown)", what));
  if (r.push("peak_flops") != LUA_TNIL) read_peaks(L, -1, hw, what);
  lua_pop(L, 1);
  if (r.push("dispatch") != LUA_TNIL) {
    if (!lua_istable(L, -1)) throw ConfigError(fmt::format("{}: dispatch must be a table {{kind = seconds}}", what));
    read_dispatch(L, -1, hw.dispatch_by_kind, what, "dispatch");
  }
  lua_pop(L, 1);
  if (r.push("dispatch_fixed") != LUA_TNIL) {
    if (!lua_istable(L, -1))
      throw ConfigError(fmt::format("{}: dispatch_fixed must be a table {{kind = seconds}}", what));
    read_dispatch(L, -1, hw.dispatch_fixed_by_kind, what, "dispatch_fixed");
  }
  lua_pop(L, 1);
  for (const auto& [key, link] : hardware_links) {
    if (r.push(key) != LUA_TNIL) read_link(L, -1, hw.*link, what, key);
    lua_pop(L, 1);
  }
  if (r.push("compute_efficiency") != LUA_TNIL)
    read_efficiency(L, -1, hw.compute_efficiency, what, "compute_efficiency");
  lua_pop(L, 1);
  if (r.push("memory_efficiency") != LUA_TNIL)
    read_efficiency(L, -1, hw.memory_efficiency, what, "memory_efficiency");
  lua_pop(L, 1);
  read_calibration_fields(L, index, hw.calibration, what);
  if (hw.memory_bytes < 0 || hw.memory_bandwidth < 0 || hw.l2_bytes < 0 ||
      hw.host_copy_bandwidth < 0)
    throw ConfigError(fmt::format("{}: memory sizes and bandwidths must be >= 0", what));
  validate_numbers(hw, what);  // no NaN, infinity or negative figure
}

Hardware to_hardware(lua_State* L, int index, const std::string& what) {
  Hardware hw;
  read_hardware_fields(L, index, hw, what);
  const FieldReader r(L, index, what, hardware_fields());
  for (const char* f : {"name", "peak_flops", "memory_bytes", "memory_bandwidth"})
    if (!r.has(f))
      throw ConfigError(fmt::format(
          "{}: missing field '{}' (a hardware table needs name, peak_flops, memory_bytes and "
          "memory_bandwidth; or start from the catalog: hardware(\"H100-SXM\", {{...}}))",
          what, f));
  if (hw.memory_bandwidth <= 0)
    throw ConfigError(fmt::format("{}: memory_bandwidth must be > 0", what));
  return hw;
}

void push_hardware(lua_State* L, const Hardware& hw) {
  lua_createtable(L, 0, 26);
  hardware_scalars().push(L, hw);
  lua_createtable(L, 0, dtype_count);
  for (DType t : all_dtypes) set_number(L, std::string(name_of(t)).c_str(), hw.peak(t));
  lua_setfield(L, -2, "peak_flops");
  lua_createtable(L, 0, static_cast<int>(hw.dispatch_by_kind.size()));
  for (const auto& [k, v] : hw.dispatch_by_kind) set_number(L, std::string(name_of(k)).c_str(), v);
  lua_setfield(L, -2, "dispatch");
  lua_createtable(L, 0, static_cast<int>(hw.dispatch_fixed_by_kind.size()));
  for (const auto& [k, v] : hw.dispatch_fixed_by_kind) set_number(L, std::string(name_of(k)).c_str(), v);
  lua_setfield(L, -2, "dispatch_fixed");
  for (const auto& [key, link] : hardware_links) push_link(L, key, hw.*link);
  push_efficiency(L, "compute_efficiency", hw.compute_efficiency);
  push_efficiency(L, "memory_efficiency", hw.memory_efficiency);
  push_calibration_fields(L, hw.calibration);
}

}  // namespace perfsim::dsl
