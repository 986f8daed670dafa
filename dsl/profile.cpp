// Profiles on disk: loading one by name or path for C++ callers, and writing one as readable
// Lua (`return profile { ... }`) that loads back to the same Hardware.
#include <fmt/format.h>

#include <string>

#include "core/errors.hpp"
#include "dsl/dsl.hpp"
#include "dsl/fresh_state.hpp"
#include "dsl/lua_convert.hpp"
#include "dsl/lua_profile.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim {

namespace {

// Six significant digits: well below the run-to-run spread of any measured figure.
std::string num(double v) { return fmt::format("{:.6g}", v); }

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string number_list(const double* v, std::size_t n) {
  std::string out = "{";
  for (std::size_t i = 0; i < n; ++i) out += (i > 0 ? ", " : "") + num(v[i]);
  return out + "}";
}

std::string number_list(const std::vector<double>& v) { return number_list(v.data(), v.size()); }

// Whole numbers written in full (byte counts up to GiB lose digits in 6 significant ones).
std::string integer_list(const std::vector<double>& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{:.0f}", i > 0 ? ", " : "", v[i]);
  return out + "}";
}

void write_efficiencies(std::string& out, const char* field, const std::map<OpClass, double>& table) {
  out += fmt::format("  {} = {{", field);
  bool first = true;
  for (const auto& [c, v] : table) {
    out += fmt::format("{}{} = {}", first ? "" : ", ", name_of(c), num(v));
    first = false;
  }
  out += "},\n";
}

void write_dispatch(std::string& out, const char* field, const std::map<OpKind, double>& table,
                    const char* comment) {
  if (table.empty()) return;
  out += fmt::format("  {} = {{", field);
  bool first = true;
  for (const auto& [k, v] : table) {
    out += fmt::format("{}{} = {}", first ? "" : ", ", name_of(k), num(v));
    first = false;
  }
  out += fmt::format("}}, -- {}\n", comment);
}

void write_link(std::string& out, const char* field, const Link& l) {
  out += fmt::format("  {} = {{bandwidth = {}, latency = {}}},\n", field, num(l.bandwidth), num(l.latency));
}

void write_gemm(std::string& out, const Calibration& cal) {
  if (cal.gemm.empty()) return;
  out += "  -- GEMM efficiency (roofline time / measured time) over m x n x k; m counts every row\n"
         "  -- of a batched product. efficiency[i][j][l] is at m[i], n[j], k[l].\n"
         "  gemm = {\n";
  for (const auto& [dtype, t] : cal.gemm) {
    out += fmt::format("    {} = {{\n      m = {},\n      n = {},\n      k = {},\n      efficiency = {{\n",
                       name_of(dtype), number_list(t.m), number_list(t.n), number_list(t.k));
    for (std::size_t i = 0; i < t.m.size(); ++i) {
      out += fmt::format("        {{ -- m = {}\n", num(t.m[i]));
      for (std::size_t j = 0; j < t.n.size(); ++j)
        out += fmt::format("          {}, -- n = {}\n",
                           number_list(&t.efficiency[(i * t.n.size() + j) * t.k.size()], t.k.size()),
                           num(t.n[j]));
      out += "        },\n";
    }
    out += "      },\n    },\n";
  }
  out += "  },\n";
}

void write_kernels(std::string& out, const Calibration& cal) {
  if (cal.kernels.empty()) return;
  out += "  -- Kernel efficiency (roofline time / measured time) against the roofline time at the\n"
         "  -- datasheet peaks, per kind/dtype/bound.\n"
         "  kernels = {\n";
  for (const auto& [key, c] : cal.kernels)
    out += fmt::format("    [{}] = {{\n      seconds    = {},\n      efficiency = {},\n    }},\n",
                       quoted(key), number_list(c.seconds), number_list(c.efficiency));
  out += "  },\n";
}

void write_collectives(std::string& out, const Calibration& cal) {
  if (cal.collectives.empty()) return;
  out += "  -- Collectives, per group size: seconds measured at each buffer size in bytes (the nccl-tests\n"
         "  -- size). Between two sizes the time is the line through them (an alpha-beta per size range);\n"
         "  -- below the first, its time; above the last, the last range's line. {latency = s, bandwidth\n"
         "  -- = wire bytes/s} would be one line for every size.\n"
         "  collectives = {\n";
  std::string current;
  for (const auto& [key, fit] : cal.collectives) {
    const std::string name(name_of(key.first));
    if (name != current) {
      if (!current.empty()) out += "    },\n";
      out += fmt::format("    {} = {{\n", name);
      current = name;
    }
    if (fit.payload.empty())
      out += fmt::format("      [{}] = {{latency = {}, bandwidth = {}}},\n", key.second, num(fit.latency),
                         num(fit.bandwidth));
    else
      out += fmt::format("      [{}] = {{bytes = {}, seconds = {}}},\n", key.second, integer_list(fit.payload),
                         number_list(fit.seconds));
  }
  out += "    },\n  },\n";
}

}  // namespace

Hardware load_profile(const std::string& name_or_path, const std::string& module_path) {
  return dsl::in_fresh_state<ConfigError>(module_path, [&](lua_State* L) {
    dsl::StackRestore keep(L);
    lua_pushcfunction(L, dsl::guarded<dsl::api_profile>);
    lua_pushlstring(L, name_or_path.data(), name_or_path.size());
    dsl::pcall_or_throw(L, 1, 1);
    const std::string where = "profile '" + name_or_path + "'";
    Hardware hw = dsl::to_hardware(L, -1, where);
    // NaN, inf or a negative figure in a profile file would price every op as nonsense.
    validate_numbers(hw, where);
    return hw;
  }, {name_or_path});
}

std::vector<std::string> profile_names(const std::string& module_path) {
  return dsl::in_fresh_state<ConfigError>(module_path, [](lua_State* L) { return dsl::profile_names(L); });
}

std::vector<ProfileSource> profile_sources(const std::string& module_path) {
  return dsl::in_fresh_state<ConfigError>(module_path, [](lua_State* L) { return dsl::profile_sources(L); });
}

std::string profile_to_lua(const Hardware& hw) {
  const Provenance& p = hw.calibration.measured_on;
  std::string out = fmt::format(
      "-- {}: a perfsim hardware profile{}.\n"
      "-- Load it with `hardware = profile \"{}\"` (when it sits in a profiles/ directory on the\n"
      "-- module path) or `perfsim run --profile FILE`. docs/CALIBRATION.md explains each field.\n",
      hw.name,
      p.device.empty() ? std::string()
                       : fmt::format(", fitted by `perfsim calibrate` ({}) on {}\n-- ({} backend{}{}) on {}",
                                     p.mode.empty() ? "full" : p.mode, p.device, p.backend,
                                     p.driver.empty() ? "" : ", driver " + p.driver,
                                     p.runtime.empty() ? "" : ", " + p.runtime, p.date),
      hw.name);
  out += "return profile {\n";
  out += fmt::format("  name = {},\n  base = {},\n  kind = {},\n", quoted(hw.name),
                     quoted(hw.base.empty() ? hw.name : hw.base), quoted(hw.kind));
  if (!hw.source.empty()) out += fmt::format("  source = {},\n", quoted(hw.source));
  out += fmt::format("  calibrated = {},\n", hw.calibrated ? "true" : "false");
  out += fmt::format(
      "  measured = {{backend = {}, device = {}, driver = {}, runtime = {}, date = {}, mode = {}{}{}}},\n",
      quoted(p.backend), quoted(p.device), quoted(p.driver), quoted(p.runtime), quoted(p.date),
      quoted(p.mode), p.op_timing.empty() ? "" : ", op_timing = " + quoted(p.op_timing),
      p.kernels.empty() ? "" : ", kernels = " + quoted(p.kernels));
  // Datasheet figures the fitted efficiencies are relative to: written out so the profile
  // means the same thing wherever it is loaded (a CPU's base entry is estimated per machine).
  out += "  peak_flops = {";
  bool first = true;
  for (DType t : all_dtypes) {
    out += fmt::format("{}{} = {}", first ? "" : ", ", name_of(t), num(hw.peak(t)));
    first = false;
  }
  out += "},\n";
  out += fmt::format("  memory_bytes = {},\n  memory_bandwidth = {},\n  l2_bytes = {},\n  sm_count = {},\n",
                     num(hw.memory_bytes), num(hw.memory_bandwidth), num(hw.l2_bytes), hw.sm_count);
  out += fmt::format("  launch_eager = {},   -- seconds per op launched eagerly\n", num(hw.launch_eager));
  out += fmt::format("  launch_graph = {},   -- seconds per op replayed from a CUDA graph\n", num(hw.launch_graph));
  out += fmt::format("  launch_wait = {},    -- seconds more when the device waits for an eager launch\n",
                     num(hw.launch_wait));
  out += fmt::format("  host_overhead = {},\n  host_copy_bandwidth = {},\n", num(hw.host_overhead),
                     num(hw.host_copy_bandwidth));
  out += fmt::format("  engine_host_per_op = {}, -- a serving engine's host seconds per op of an eager step\n",
                     num(hw.engine_host_per_op));
  out += fmt::format("  engine_host_per_step = {}, -- and per eager step besides its ops\n",
                     num(hw.engine_host_per_step));
  out += fmt::format("  dispatch_eager = {}, -- host seconds to issue one op eagerly\n", num(hw.dispatch_eager));
  write_dispatch(out, "dispatch", hw.dispatch_by_kind, "host seconds per kernel launched");
  write_dispatch(out, "dispatch_fixed", hw.dispatch_fixed_by_kind, "and per op, for kinds of several kernels");
  write_link(out, "pcie", hw.pcie);
  write_link(out, "nvlink", hw.nvlink);
  write_link(out, "infiniband", hw.infiniband);
  if (hw.gpus_per_node > 0)
    out += fmt::format("  gpus_per_node = {},  -- a collective over more GPUs crosses nodes (infiniband)\n",
                       hw.gpus_per_node);
  write_efficiencies(out, "compute_efficiency", hw.compute_efficiency);
  write_efficiencies(out, "memory_efficiency", hw.memory_efficiency);
  write_gemm(out, hw.calibration);
  write_kernels(out, hw.calibration);
  write_collectives(out, hw.calibration);
  out += "}\n";
  return out;
}

}  // namespace perfsim
