// Lua tables <-> Hardware: datasheet peaks per dtype, memory, links and the per-class
// efficiency tables. Nested tables merge into the base when used as overrides.
#include <fmt/format.h>
#include <fmt/ranges.h>

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

}  // namespace

const std::vector<std::string>& hardware_fields() {
  static const std::vector<std::string> f = {
      "name",          "kind",          "peak_flops",   "memory_bytes", "memory_bandwidth",
      "l2_bytes",      "sm_count",      "launch_eager", "launch_graph", "host_overhead",
      "nvlink",        "pcie",          "infiniband",   "compute_efficiency",
      "memory_efficiency", "calibrated", "source",      "aliases",      "host_copy_bandwidth",
      "base",          "measured",      "gemm",         "kernels",      "collectives",
      "dispatch_eager", "dispatch", "dispatch_fixed", "launch_wait", "gpus_per_node"};
  return f;
}

void read_hardware_fields(lua_State* L, int index, Hardware& hw, const std::string& what) {
  const FieldReader r(L, index, what, hardware_fields());
  r.read("name", hw.name);
  if (auto k = r.string("kind")) {
    if (*k != "gpu" && *k != "cpu")
      throw ConfigError(fmt::format("{}: kind must be \"gpu\" or \"cpu\" (got '{}')", what, *k));
    hw.kind = *k;
  }
  if (r.push("peak_flops") != LUA_TNIL) read_peaks(L, -1, hw, what);
  lua_pop(L, 1);
  r.read("memory_bytes", hw.memory_bytes);
  r.read("memory_bandwidth", hw.memory_bandwidth);
  r.read("l2_bytes", hw.l2_bytes);
  r.read("sm_count", hw.sm_count);
  r.read("gpus_per_node", hw.gpus_per_node);
  if (hw.gpus_per_node < 0) throw ConfigError(fmt::format("{}: gpus_per_node must be >= 0 (0 = unknown)", what));
  r.read("launch_eager", hw.launch_eager);
  r.read("launch_graph", hw.launch_graph);
  r.read("launch_wait", hw.launch_wait);
  if (hw.launch_wait < 0) throw ConfigError(fmt::format("{}: launch_wait must be >= 0", what));
  r.read("host_overhead", hw.host_overhead);
  r.read("host_copy_bandwidth", hw.host_copy_bandwidth);
  r.read("dispatch_eager", hw.dispatch_eager);
  if (hw.dispatch_eager < 0) throw ConfigError(fmt::format("{}: dispatch_eager must be >= 0", what));
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
  const std::pair<const char*, Link*> links[] = {
      {"nvlink", &hw.nvlink}, {"pcie", &hw.pcie}, {"infiniband", &hw.infiniband}};
  for (const auto& [key, link] : links) {
    if (r.push(key) != LUA_TNIL) read_link(L, -1, *link, what, key);
    lua_pop(L, 1);
  }
  if (r.push("compute_efficiency") != LUA_TNIL)
    read_efficiency(L, -1, hw.compute_efficiency, what, "compute_efficiency");
  lua_pop(L, 1);
  if (r.push("memory_efficiency") != LUA_TNIL)
    read_efficiency(L, -1, hw.memory_efficiency, what, "memory_efficiency");
  lua_pop(L, 1);
  r.read("calibrated", hw.calibrated);
  r.read("base", hw.base);
  r.read("source", hw.source);
  read_calibration_fields(L, index, hw.calibration, what);
  if (hw.memory_bytes < 0 || hw.memory_bandwidth < 0 || hw.l2_bytes < 0 ||
      hw.host_copy_bandwidth < 0)
    throw ConfigError(fmt::format("{}: memory sizes and bandwidths must be >= 0", what));
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
  lua_pushstring(L, hw.name.c_str());
  lua_setfield(L, -2, "name");
  lua_pushstring(L, hw.kind.c_str());
  lua_setfield(L, -2, "kind");
  lua_createtable(L, 0, dtype_count);
  for (DType t : all_dtypes) set_number(L, std::string(name_of(t)).c_str(), hw.peak(t));
  lua_setfield(L, -2, "peak_flops");
  set_number(L, "memory_bytes", hw.memory_bytes);
  set_number(L, "memory_bandwidth", hw.memory_bandwidth);
  set_number(L, "l2_bytes", hw.l2_bytes);
  set_number(L, "sm_count", hw.sm_count);
  set_number(L, "gpus_per_node", hw.gpus_per_node);
  set_number(L, "launch_eager", hw.launch_eager);
  set_number(L, "launch_graph", hw.launch_graph);
  set_number(L, "launch_wait", hw.launch_wait);
  set_number(L, "host_overhead", hw.host_overhead);
  set_number(L, "host_copy_bandwidth", hw.host_copy_bandwidth);
  set_number(L, "dispatch_eager", hw.dispatch_eager);
  lua_createtable(L, 0, static_cast<int>(hw.dispatch_by_kind.size()));
  for (const auto& [k, v] : hw.dispatch_by_kind) set_number(L, std::string(name_of(k)).c_str(), v);
  lua_setfield(L, -2, "dispatch");
  lua_createtable(L, 0, static_cast<int>(hw.dispatch_fixed_by_kind.size()));
  for (const auto& [k, v] : hw.dispatch_fixed_by_kind) set_number(L, std::string(name_of(k)).c_str(), v);
  lua_setfield(L, -2, "dispatch_fixed");
  push_link(L, "nvlink", hw.nvlink);
  push_link(L, "pcie", hw.pcie);
  push_link(L, "infiniband", hw.infiniband);
  push_efficiency(L, "compute_efficiency", hw.compute_efficiency);
  push_efficiency(L, "memory_efficiency", hw.memory_efficiency);
  lua_pushboolean(L, hw.calibrated ? 1 : 0);
  lua_setfield(L, -2, "calibrated");
  lua_pushstring(L, hw.source.c_str());
  lua_setfield(L, -2, "source");
  set_string(L, "base", hw.base);
  push_calibration_fields(L, hw.calibration);
}

}  // namespace perfsim::dsl
