// Lua tables <-> Calibration: the fitted GEMM grids, kernel curves, collective fits and the
// provenance a profile carries (the fields gemm, kernels, collectives and measured of a
// hardware table). Every number is checked on the way in: a hand-edited profile with a
// negative efficiency or a ragged grid is an error naming the field, never a silent NaN.
#include "dsl/lua_calibration.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "dsl/lua_convert.hpp"
#include "dsl/lua_fields.hpp"

namespace perfsim::dsl {

namespace {

// The array at `index` as numbers, each > 0 (and ascending when `ascending`).
std::vector<double> read_positive_array(lua_State* L, int index, const std::string& what,
                                        bool ascending) {
  index = abs_index(L, index);
  if (!lua_istable(L, index))
    throw ConfigError(fmt::format("{} must be a list of numbers (got {})", what, describe_value(L, index)));
  const int n = array_length(L, index);
  if (n == 0) throw ConfigError(fmt::format("{} must not be empty", what));
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, index, i);
    if (lua_type(L, -1) != LUA_TNUMBER)
      throw ConfigError(fmt::format("{}[{}] must be a number (got {})", what, i, describe_value(L, -1)));
    const double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    if (!(v > 0)) throw ConfigError(fmt::format("{}[{}] must be > 0 (got {})", what, i, format_number(v)));
    if (ascending && !out.empty() && !(v > out.back()))
      throw ConfigError(fmt::format("{} must be ascending ({}[{}] = {} after {})", what, what, i,
                                    format_number(v), format_number(out.back())));
    out.push_back(v);
  }
  return out;
}

// Pushes t[key] of the table at `index` and checks it is a table.
void push_table_field(lua_State* L, int index, const char* key, const std::string& what) {
  lua_getfield(L, index, key);
  if (!lua_istable(L, -1))
    throw ConfigError(fmt::format("{}.{} must be a table (got {})", what, key, describe_value(L, -1)));
}

// read_positive_array of the table's field `key` (named `where.key` in errors).
std::vector<double> read_positive_field(lua_State* L, int table, const char* key, const std::string& where,
                                        bool ascending) {
  push_table_field(L, table, key, where);
  std::vector<double> out = read_positive_array(L, -1, where + "." + key, ascending);
  lua_pop(L, 1);
  return out;
}

// Pushes t[i] of the table at `index` and checks it is a table with `expected` entries.
void push_row(lua_State* L, int index, int i, std::size_t expected, const std::string& what) {
  lua_rawgeti(L, index, i);
  if (!lua_istable(L, -1) || static_cast<std::size_t>(array_length(L, -1)) != expected)
    throw ConfigError(fmt::format("{}[{}] must be a list of {} entries", what, i, expected));
}

GemmTable read_gemm_table(lua_State* L, int index, const std::string& what) {
  index = abs_index(L, index);
  const FieldReader r(L, index, what, {"m", "n", "k", "efficiency"});
  GemmTable t;
  for (auto [key, axis] : {std::pair{"m", &t.m}, std::pair{"n", &t.n}, std::pair{"k", &t.k}})
    *axis = read_positive_field(L, index, key, what, true);
  // efficiency[i][j][l]: rows over m, then n, then k (the order profile_to_lua writes).
  const std::string eff = what + ".efficiency";
  push_table_field(L, index, "efficiency", what);
  const int grid = lua_gettop(L);
  if (static_cast<std::size_t>(array_length(L, grid)) != t.m.size())
    throw ConfigError(fmt::format("{} must hold one entry per m ({})", eff, t.m.size()));
  t.efficiency.reserve(t.m.size() * t.n.size() * t.k.size());
  for (std::size_t i = 1; i <= t.m.size(); ++i) {
    push_row(L, grid, static_cast<int>(i), t.n.size(), eff);
    const int plane = lua_gettop(L);
    for (std::size_t j = 1; j <= t.n.size(); ++j) {
      const std::string row = fmt::format("{}[{}][{}]", eff, i, j);
      lua_rawgeti(L, plane, static_cast<int>(j));
      const std::vector<double> values = read_positive_array(L, -1, row, false);
      lua_pop(L, 1);
      if (values.size() != t.k.size())
        throw ConfigError(fmt::format("{} must hold one entry per k ({})", row, t.k.size()));
      t.efficiency.insert(t.efficiency.end(), values.begin(), values.end());
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return t;
}

EfficiencyCurve read_curve(lua_State* L, int index, const std::string& what) {
  index = abs_index(L, index);
  const FieldReader r(L, index, what, {"seconds", "efficiency"});
  EfficiencyCurve c;
  c.seconds = read_positive_field(L, index, "seconds", what, true);
  c.efficiency = read_positive_field(L, index, "efficiency", what, false);
  if (c.efficiency.size() != c.seconds.size())
    throw ConfigError(fmt::format("{}: {} efficiencies for {} seconds", what, c.efficiency.size(),
                                  c.seconds.size()));
  return c;
}

void read_gemm(lua_State* L, int index, Calibration& cal, const std::string& what) {
  for (const std::string& key : string_keys(L, index)) {
    const std::optional<DType> t = parse_dtype(key);
    if (!t) throw ConfigError(fmt::format("{}: '{}' is not a dtype (fp32, tf32, bf16, fp16, fp8, int8)", what, key));
    lua_getfield(L, index, key.c_str());
    cal.gemm[*t] = read_gemm_table(L, -1, what + "." + key);
    lua_pop(L, 1);
  }
}

void read_kernels(lua_State* L, int index, Calibration& cal, const std::string& what) {
  for (const std::string& key : string_keys(L, index)) {
    // "kind/dtype/bound[/variant]", the form calibration_key() writes.
    std::vector<std::string> parts;
    for (std::size_t start = 0;;) {
      const std::size_t slash = key.find('/', start);
      parts.push_back(key.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    const bool known_variant = parts.size() == 4 && is_calibration_variant(parts[3]);
    const bool ok = (parts.size() == 3 || known_variant) &&
                    parse_op_kind(parts[0]) && parse_dtype(parts[1]) &&
                    (parts[2] == "compute" || parts[2] == "memory");
    if (!ok)
      throw ConfigError(fmt::format(
          "{}: key '{}' must read kind/dtype/bound[/variant] (variant: decode, paged, fused, contiguous, "
          "unaligned[_<layout>_<operands>], decode_q1/q4/qn, varlen_decode[_q1/q4/qn], int4w, int8w, or "
          "one of them with _fp8kv), "
          "e.g. \"rmsnorm/bf16/memory\"",
          what, key));
    // Curves are keyed by kind family (calibration_key): a key naming a paged or varlen kind
    // would never be read.
    if (const OpKind k = *parse_op_kind(parts[0]); calibration_family(k) != k)
      throw ConfigError(fmt::format("{}: key '{}': {} ops are priced by the curves of {}; name that kind (a paged "
                                    "cache's curve has the variant \"paged\")",
                                    what, key, parts[0], name_of(calibration_family(k))));
    lua_getfield(L, index, key.c_str());
    cal.kernels[key] = read_curve(L, -1, fmt::format("{}[\"{}\"]", what, key));
    lua_pop(L, 1);
  }
}

// One group's fit: measured {bytes, seconds} (what calibrate writes), or one hand-written
// {latency, bandwidth} line for every size.
CollectiveFit read_collective_fit(lua_State* L, int index, const std::string& where) {
  const FieldReader f(L, index, where, {"bytes", "seconds", "latency", "bandwidth"});
  CollectiveFit fit;
  const bool points = f.has("bytes") || f.has("seconds");
  if (points == (f.has("latency") || f.has("bandwidth")))
    throw ConfigError(fmt::format("{}: give either bytes and seconds (measured points) or latency and bandwidth "
                                  "(one line for every size)",
                                  where));
  if (!points) {
    f.read("latency", fit.latency);
    f.read("bandwidth", fit.bandwidth);
    if (fit.latency < 0 || !(fit.bandwidth > 0))
      throw ConfigError(fmt::format("{}: latency must be >= 0 and bandwidth > 0", where));
    return fit;
  }
  fit.payload = read_positive_field(L, index, "bytes", where, true);
  fit.seconds = read_positive_field(L, index, "seconds", where, false);
  if (fit.seconds.size() != fit.payload.size() || fit.payload.size() < 2)
    throw ConfigError(fmt::format("{}: needs 2 or more bytes with a time each (has {} bytes, {} seconds)", where,
                                  fit.payload.size(), fit.seconds.size()));
  for (std::size_t i = 1; i < fit.seconds.size(); ++i)
    if (fit.seconds[i] < fit.seconds[i - 1])
      throw ConfigError(fmt::format("{}.seconds must not decrease with bytes ({}.seconds[{}] = {} after {})", where,
                                    where, i + 1, format_number(fit.seconds[i]), format_number(fit.seconds[i - 1])));
  return fit;
}

void read_collectives(lua_State* L, int index, Calibration& cal, const std::string& what) {
  for (const std::string& key : string_keys(L, index)) {
    const Collective c = to_collective(key, what);
    lua_getfield(L, index, key.c_str());
    const int groups = lua_gettop(L);
    if (!lua_istable(L, groups))
      throw ConfigError(fmt::format(
          "{}.{} must be a table {{[group] = {{bytes = {{...}}, seconds = {{...}}}}}} (or {{latency, bandwidth}})",
          what, key));
    lua_pushnil(L);
    while (lua_next(L, groups) != 0) {
      const std::string where = fmt::format("{}.{}[{}]", what, key, describe_value(L, -2));
      if (lua_type(L, -2) != LUA_TNUMBER)
        throw ConfigError(fmt::format("{}: keys must be group sizes (numbers >= 2)", where));
      const int64_t group = to_integer(L, -2, where);
      if (group < 2) throw ConfigError(fmt::format("{}: group size must be >= 2", where));
      cal.collectives[{c, static_cast<int>(group)}] =
          read_collective_fit(L, lua_gettop(L), fmt::format("{}.{}[{}]", what, key, group));
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

// Provenance's fields but op_timing and kernels, which profiles leave out where the backend
// does not say or the profile predates fingerprints.
const ScalarFields<Provenance>& provenance_scalars() {
  static const ScalarFields<Provenance> f = {
      {"backend", &Provenance::backend}, {"device", &Provenance::device}, {"driver", &Provenance::driver},
      {"runtime", &Provenance::runtime}, {"date", &Provenance::date},     {"mode", &Provenance::mode}};
  return f;
}

void read_provenance(lua_State* L, int index, Provenance& p, const std::string& what) {
  std::vector<std::string> known = provenance_scalars().keys();
  known.emplace_back("op_timing");
  known.emplace_back("kernels");
  const FieldReader r(L, index, what, known);
  provenance_scalars().read(r, p);
  r.read("op_timing", p.op_timing);
  r.read("kernels", p.kernels);
}

void push_numbers(lua_State* L, const double* values, std::size_t n) {
  lua_createtable(L, static_cast<int>(n), 0);
  for (std::size_t i = 0; i < n; ++i) {
    lua_pushnumber(L, values[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

void push_numbers(lua_State* L, const std::vector<double>& v) { push_numbers(L, v.data(), v.size()); }

}  // namespace

void read_calibration_fields(lua_State* L, int index, Calibration& cal, const std::string& what) {
  index = abs_index(L, index);
  const std::pair<const char*, void (*)(lua_State*, int, Calibration&, const std::string&)> parts[] = {
      {"gemm", read_gemm}, {"kernels", read_kernels}, {"collectives", read_collectives}};
  for (const auto& [key, read] : parts) {
    lua_getfield(L, index, key);
    if (!lua_isnil(L, -1)) {
      if (!lua_istable(L, -1))
        throw ConfigError(fmt::format("{}: {} must be a table (got {})", what, key, describe_value(L, -1)));
      // Entries are named ({bf16 = {...}}): a list entry would otherwise be skipped unseen.
      lua_pushnil(L);
      while (lua_next(L, -2) != 0) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
          const std::string entry = describe_value(L, -1);
          throw ConfigError(fmt::format("{}: {} holds an unnamed entry (key {}); its entries are named, "
                                        "as `perfsim calibrate` writes them",
                                        what, key, entry));
        }
      }
      read(L, lua_gettop(L), cal, what + " " + key);
    }
    lua_pop(L, 1);
  }
  lua_getfield(L, index, "measured");
  if (!lua_isnil(L, -1)) {
    if (!lua_istable(L, -1))
      throw ConfigError(fmt::format("{}: measured must be a table (got {})", what, describe_value(L, -1)));
    read_provenance(L, lua_gettop(L), cal.measured_on, what + " measured");
  }
  lua_pop(L, 1);
}

void push_calibration_fields(lua_State* L, const Calibration& cal) {
  const Provenance& p = cal.measured_on;
  lua_createtable(L, 0, 7);
  provenance_scalars().push(L, p);
  if (!p.op_timing.empty()) set_string(L, "op_timing", p.op_timing);
  if (!p.kernels.empty()) set_string(L, "kernels", p.kernels);
  lua_setfield(L, -2, "measured");

  lua_createtable(L, 0, static_cast<int>(cal.gemm.size()));
  for (const auto& [dtype, t] : cal.gemm) {
    lua_createtable(L, 0, 4);
    push_numbers(L, t.m);
    lua_setfield(L, -2, "m");
    push_numbers(L, t.n);
    lua_setfield(L, -2, "n");
    push_numbers(L, t.k);
    lua_setfield(L, -2, "k");
    lua_createtable(L, static_cast<int>(t.m.size()), 0);
    for (std::size_t i = 0; i < t.m.size(); ++i) {
      lua_createtable(L, static_cast<int>(t.n.size()), 0);
      for (std::size_t j = 0; j < t.n.size(); ++j) {
        push_numbers(L, &t.efficiency[(i * t.n.size() + j) * t.k.size()], t.k.size());
        lua_rawseti(L, -2, static_cast<int>(j + 1));
      }
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    lua_setfield(L, -2, "efficiency");
    lua_setfield(L, -2, std::string(name_of(dtype)).c_str());
  }
  lua_setfield(L, -2, "gemm");

  lua_createtable(L, 0, static_cast<int>(cal.kernels.size()));
  for (const auto& [key, c] : cal.kernels) {
    lua_createtable(L, 0, 2);
    push_numbers(L, c.seconds);
    lua_setfield(L, -2, "seconds");
    push_numbers(L, c.efficiency);
    lua_setfield(L, -2, "efficiency");
    lua_setfield(L, -2, key.c_str());
  }
  lua_setfield(L, -2, "kernels");

  lua_newtable(L);
  for (const auto& [key, fit] : cal.collectives) {
    const std::string name(name_of(key.first));
    lua_getfield(L, -1, name.c_str());
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      lua_newtable(L);
      lua_pushvalue(L, -1);
      lua_setfield(L, -3, name.c_str());
    }
    lua_createtable(L, 0, 2);
    if (fit.payload.empty()) {
      set_number(L, "latency", fit.latency);
      set_number(L, "bandwidth", fit.bandwidth);
    } else {
      push_numbers(L, fit.payload);
      lua_setfield(L, -2, "bytes");
      push_numbers(L, fit.seconds);
      lua_setfield(L, -2, "seconds");
    }
    lua_rawseti(L, -2, key.second);
    lua_pop(L, 1);
  }
  lua_setfield(L, -2, "collectives");
}

}  // namespace perfsim::dsl
