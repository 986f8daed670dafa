#include "dsl/lua_serve.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "core/errors.hpp"
#include "core/serve/traffic.hpp"
#include "core/text.hpp"
#include "dsl/lua_fields.hpp"
#include "dsl/lua_sandbox.hpp"
#include "dsl/lua_state.hpp"
#include "dsl/script_context.hpp"

namespace perfsim::dsl {

namespace {

std::string resolve(const std::string& file, const std::string& dir) {
  const std::filesystem::path p(file);
  if (p.is_absolute() || dir.empty()) return file;
  return (std::filesystem::path(dir) / p).string();
}

Arrivals read_arrivals(lua_State* L, int index, const std::string& what, const std::string& dir) {
  index = abs_index(L, index);
  if (!lua_istable(L, index))
    throw ConfigError(fmt::format("{} must be poisson{{rate = ...}}, gamma{{rate, burstiness}}, ramp{{start_rate, "
                                  "rate}}, closed{{users, think}} or trace \"file\" (got {})",
                                  what, describe_value(L, index)));
  lua_getfield(L, index, "kind");
  const std::string kind = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
  lua_pop(L, 1);
  Arrivals a;
  const std::vector<std::pair<std::string, ArrivalKind>> kinds = {{"poisson", ArrivalKind::poisson},
                                                                  {"gamma", ArrivalKind::gamma},
                                                                  {"ramp", ArrivalKind::ramp},
                                                                  {"closed", ArrivalKind::closed},
                                                                  {"trace", ArrivalKind::trace}};
  bool found = false;
  for (const auto& [name, k] : kinds)
    if (name == kind) a.kind = k, found = true;
  if (!found)
    throw ConfigError(fmt::format("{} must be built with poisson{{}}, gamma{{}}, ramp{{}}, closed{{}} or trace \"file\"",
                                  what));
  const std::string w = fmt::format("{} ({}{{}})", what, kind);
  switch (a.kind) {
    case ArrivalKind::poisson: {
      const FieldReader r(L, index, w, {"kind", "rate"});
      r.read("rate", a.rate);
      if (!r.has("rate")) throw ConfigError(fmt::format("{} needs rate = requests per second", w));
      break;
    }
    case ArrivalKind::gamma: {
      const FieldReader r(L, index, w, {"kind", "rate", "burstiness"});
      r.read("rate", a.rate);
      r.read("burstiness", a.burstiness);
      if (!r.has("rate")) throw ConfigError(fmt::format("{} needs rate = requests per second", w));
      break;
    }
    case ArrivalKind::ramp: {
      const FieldReader r(L, index, w, {"kind", "start_rate", "rate"});
      r.read("start_rate", a.start_rate);
      r.read("rate", a.rate);
      if (!r.has("rate")) throw ConfigError(fmt::format("{} needs rate = the final requests per second", w));
      break;
    }
    case ArrivalKind::closed: {
      const FieldReader r(L, index, w, {"kind", "users", "think"});
      r.read("users", a.users);
      r.read("think", a.think);
      if (!r.has("users")) throw ConfigError(fmt::format("{} needs users = concurrent clients", w));
      break;
    }
    case ArrivalKind::trace: {
      const FieldReader r(L, index, w, {"kind", "file"});
      r.read("file", a.file);
      if (a.file.empty()) throw ConfigError(fmt::format("{} needs a file: trace \"requests.jsonl\"", w));
      a.file = resolve(a.file, dir);
      check_script_readable(L, a.file, "trace");
      break;
    }
  }
  return a;
}

Lengths read_lengths_field(lua_State* L, int index, const std::string& what, const std::string& dir,
                           double default_mean) {
  index = abs_index(L, index);
  Lengths l;
  l.mean = default_mean;
  if (lua_isnil(L, index)) return l;
  if (lua_type(L, index) == LUA_TNUMBER) {
    l.mean = lua_tonumber(L, index);
    return l;
  }
  if (!lua_istable(L, index))
    throw ConfigError(fmt::format("{} must be a token count or lengths{{dist = \"lognormal\", mean = ..., max = "
                                  "...}} (got {})",
                                  what, describe_value(L, index)));
  const FieldReader r(L, index, what, {"kind", "dist", "mean", "stddev", "min", "max", "file"});
  const std::string dist = r.string("dist").value_or("fixed");
  const std::vector<std::pair<std::string, LengthDist>> dists = {{"fixed", LengthDist::fixed},
                                                                 {"uniform", LengthDist::uniform},
                                                                 {"normal", LengthDist::normal},
                                                                 {"lognormal", LengthDist::lognormal},
                                                                 {"file", LengthDist::file}};
  bool found = false;
  std::vector<std::string> names;
  for (const auto& [name, d] : dists) {
    names.push_back(name);
    if (name == dist) l.dist = d, found = true;
  }
  if (!found)
    throw ConfigError(fmt::format("{}: dist '{}' is not one of {}{}", what, dist, fmt::join(names, ", "),
                                  did_you_mean(dist, names)));
  r.read("mean", l.mean);
  r.read("stddev", l.stddev);
  r.read("min", l.min);
  r.read("max", l.max);
  r.read("file", l.file);
  if (l.dist == LengthDist::file) {
    if (l.file.empty()) throw ConfigError(fmt::format("{}: dist = \"file\" needs file = \"lengths.txt\"", what));
    l.file = resolve(l.file, dir);
    check_script_readable(L, l.file, "lengths file");
    l.values = read_lengths(l.file);
  } else if (!l.file.empty()) {
    throw ConfigError(fmt::format("{}: file is read only with dist = \"file\"", what));
  }
  return l;
}

}  // namespace

ServeSpec to_serve(lua_State* L, int index, const std::string& what, const std::string& dir) {
  index = abs_index(L, index);
  const FieldReader r(L, index, what,
                      {"phase", "where", "requests", "seed", "arrivals", "prompt", "output", "prefix", "slo"});
  ServeSpec s;
  s.where = r.string("where").value_or("");
  r.read("requests", s.requests);
  if (auto seed = r.integer("seed")) {
    if (*seed < 0) throw ConfigError(fmt::format("{}: seed must be >= 0 (got {})", what, *seed));
    s.seed = static_cast<uint64_t>(*seed);
  }
  if (r.push("arrivals") == LUA_TNIL)
    throw ConfigError(fmt::format("{} needs arrivals = poisson{{rate = ...}} (or gamma{{}}, ramp{{}}, closed{{}}, "
                                  "trace \"file\")",
                                  what));
  s.arrivals = read_arrivals(L, -1, what + ".arrivals", dir);
  lua_pop(L, 1);
  r.push("prompt");
  s.prompt = read_lengths_field(L, -1, what + ".prompt", dir, 512);
  lua_pop(L, 1);
  r.push("output");
  s.output = read_lengths_field(L, -1, what + ".output", dir, 128);
  lua_pop(L, 1);
  if (r.push("prefix") != LUA_TNIL) {
    const FieldReader p(L, lua_gettop(L), what + ".prefix", {"groups", "tokens", "share"});
    p.read("groups", s.prefix.groups);
    p.read("tokens", s.prefix.tokens);
    p.read("share", s.prefix.share);
  }
  lua_pop(L, 1);
  if (r.push("slo") != LUA_TNIL) {
    const FieldReader p(L, lua_gettop(L), what + ".slo", {"ttft", "tpot", "e2e"});
    p.read("ttft", s.slo.ttft);
    p.read("tpot", s.slo.tpot);
    p.read("e2e", s.slo.e2e);
  }
  lua_pop(L, 1);
  validate(s);  // its errors start with the serve{} call's line (where)
  return s;
}

int api_serve(lua_State* L) {
  if (!lua_istable(L, 1))
    throw ConfigError("serve{...} takes a table: serve{requests = 1000, arrivals = poisson{rate = 10}, ...}");
  lua_getfield(L, 1, "where");
  const bool has_where = !lua_isnil(L, -1);
  lua_pop(L, 1);
  lua_pushvalue(L, 1);
  if (!has_where) set_string(L, "where", script_where(L));  // errors found later point here
  (void)to_serve(L, 1, "serve{}", context(L).dir);
  set_string(L, "phase", "serve");
  return 1;
}

}  // namespace perfsim::dsl
