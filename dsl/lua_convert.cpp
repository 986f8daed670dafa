// Lua tables <-> ModelConfig, Workload, StackStep and ExecuteOptions (hardware is in
// lua_hardware.cpp). Readers reject unknown fields and wrong types with the table's name.
#include "dsl/lua_convert.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/text.hpp"
#include "dsl/lua_fields.hpp"

namespace perfsim::dsl {

namespace {


template <typename E>
E parse_choice(const std::string& value, const std::vector<std::pair<std::string, E>>& choices,
               const std::string& what, const char* field) {
  std::vector<std::string> names;
  for (const auto& [name, e] : choices) {
    if (to_lower(value) == name) return e;
    names.push_back(name);
  }
  throw ConfigError(fmt::format("{}: {} '{}' is not one of {}{}", what, field, value,
                                fmt::join(names, ", "), did_you_mean(value, names)));
}

const std::vector<std::pair<std::string, Activation>> activations = {
    {"gelu", Activation::gelu}, {"swiglu", Activation::swiglu}};
const std::vector<std::pair<std::string, NormKind>> norms = {{"layernorm", NormKind::layernorm},
                                                             {"rmsnorm", NormKind::rmsnorm}};

Phase parse_phase(const std::string& s, const std::string& what) {
  return parse_choice<Phase>(
      s, {{"prefill", Phase::prefill}, {"decode", Phase::decode}, {"train", Phase::train}}, what,
      "phase");
}

}  // namespace

Collective to_collective(const std::string& name, const std::string& what) {
  std::vector<std::pair<std::string, Collective>> choices;
  for (Collective c : all_collectives) choices.emplace_back(std::string(name_of(c)), c);
  return parse_choice(name, choices, what, "collective");
}

const std::vector<std::string>& model_fields() {
  static const std::vector<std::string> f = {
      "name",  "layers",  "hidden", "heads",      "kv_heads",        "ffn_hidden", "vocab",
      "max_seq", "activation", "norm", "rope", "tied_embeddings", "bias",       "aliases"};
  return f;
}

void read_model_fields(lua_State* L, int index, ModelConfig& m, const std::string& what) {
  const FieldReader r(L, index, what, model_fields());
  r.read("name", m.name);
  r.read("layers", m.layers);
  r.read("hidden", m.hidden);
  r.read("heads", m.heads);
  r.read("kv_heads", m.kv_heads);
  r.read("ffn_hidden", m.ffn_hidden);
  r.read("vocab", m.vocab);
  r.read("max_seq", m.max_seq);
  if (auto a = r.string("activation")) m.activation = parse_choice(*a, activations, what, "activation");
  if (auto n = r.string("norm")) m.norm = parse_choice(*n, norms, what, "norm");
  r.read("rope", m.rope);
  r.read("tied_embeddings", m.tied_embeddings);
  r.read("bias", m.bias);
}

ModelConfig to_model(lua_State* L, int index, const std::string& what) {
  ModelConfig m;
  m.name = "custom";
  read_model_fields(L, index, m, what);
  const FieldReader r(L, index, what, model_fields());
  for (const char* f : {"layers", "hidden", "heads", "ffn_hidden", "vocab", "max_seq"})
    if (!r.has(f))
      throw ConfigError(fmt::format(
          "{}: missing field '{}' (a model table needs layers, hidden, heads, ffn_hidden, vocab "
          "and max_seq; or use a zoo name such as model(\"llama-3-8b\"))",
          what, f));
  return m;
}

void push_model(lua_State* L, const ModelConfig& m) {
  lua_createtable(L, 0, 13);
  set_string(L, "name", m.name);
  set_number(L, "layers", static_cast<double>(m.layers));
  set_number(L, "hidden", static_cast<double>(m.hidden));
  set_number(L, "heads", static_cast<double>(m.heads));
  set_number(L, "kv_heads", static_cast<double>(m.kv_heads_or_heads()));
  set_number(L, "ffn_hidden", static_cast<double>(m.ffn_hidden));
  set_number(L, "vocab", static_cast<double>(m.vocab));
  set_number(L, "max_seq", static_cast<double>(m.max_seq));
  set_string(L, "activation", m.activation == Activation::gelu ? "gelu" : "swiglu");
  set_string(L, "norm", m.norm == NormKind::layernorm ? "layernorm" : "rmsnorm");
  set_bool(L, "rope", m.rope);
  set_bool(L, "tied_embeddings", m.tied_embeddings);
  set_bool(L, "bias", m.bias);
}

const std::vector<std::string>& workload_fields(Phase p) {
  // new_tokens sizes the KV cache the prefill writes (the generation that follows).
  static const std::vector<std::string> prefill = {"batch", "prompt", "new_tokens"};
  static const std::vector<std::string> decode = {"batch", "prompt", "new_tokens", "kv_cache"};
  static const std::vector<std::string> train = {"batch", "seq", "grad_accum"};
  switch (p) {
    case Phase::prefill: return prefill;
    case Phase::decode: return decode;
    case Phase::train: return train;
  }
  return decode;
}

Workload to_workload(lua_State* L, int index, Phase phase, const std::string& what) {
  Workload w;
  w.phase = phase;
  const FieldReader r(L, index, what, workload_fields(phase));
  r.read("batch", w.batch);
  r.read("prompt", w.prompt);
  r.read("new_tokens", w.new_tokens);
  r.read("kv_cache", w.kv_cache);
  r.read("seq", w.seq);
  r.read("grad_accum", w.grad_accum);
  validate(w);
  return w;
}

Workload to_workload(lua_State* L, int index, const std::string& what) {
  index = abs_index(L, index);
  if (!lua_istable(L, index))
    throw ConfigError(fmt::format("{} must be a workload such as decode{{batch = 1, prompt = 512}} (got {})",
                                  what, describe_value(L, index)));
  lua_getfield(L, index, "phase");
  if (lua_type(L, -1) != LUA_TSTRING) {
    lua_pop(L, 1);
    throw ConfigError(fmt::format(
        "{} needs a phase: build it with prefill{{...}}, decode{{...}} or train{{...}}", what));
  }
  const Phase phase = parse_phase(lua_tostring(L, -1), what);
  lua_pop(L, 1);
  // Read the table without its phase through a copy, so the phase's own fields are checked.
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, index) != 0) {
    const bool is_phase = lua_type(L, -2) == LUA_TSTRING && std::string(lua_tostring(L, -2)) == "phase";
    if (is_phase) {
      lua_pop(L, 1);
      continue;
    }
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_settable(L, -4);
  }
  Workload w = to_workload(L, -1, phase, what);
  lua_pop(L, 1);
  return w;
}

void push_workload(lua_State* L, const Workload& w) {
  lua_createtable(L, 0, 5);
  set_string(L, "phase", name_of(w.phase));
  set_number(L, "batch", static_cast<double>(w.batch));
  switch (w.phase) {
    case Phase::prefill:
      set_number(L, "prompt", static_cast<double>(w.prompt));
      set_number(L, "new_tokens", static_cast<double>(w.new_tokens));
      break;
    case Phase::decode:
      set_number(L, "prompt", static_cast<double>(w.prompt));
      set_number(L, "new_tokens", static_cast<double>(w.new_tokens));
      set_bool(L, "kv_cache", w.kv_cache);
      break;
    case Phase::train:
      set_number(L, "seq", static_cast<double>(w.seq));
      set_number(L, "grad_accum", static_cast<double>(w.grad_accum));
      break;
  }
}

StackStep to_step(lua_State* L, int index, const std::string& what) {
  index = abs_index(L, index);
  StackStep step;
  if (lua_type(L, index) == LUA_TSTRING) {
    step.name = lua_tostring(L, index);
    step.passes.push_back(PassSpec{step.name, std::nullopt});
  } else {
    const FieldReader r(L, index, what, {"name", "passes", "where"});
    const auto name = r.string("name");
    step.where = r.string("where").value_or("");
    if (!name) throw ConfigError(fmt::format("{}: missing field 'name' (use step(\"name\", passes...))", what));
    step.name = *name;
    if (r.push("passes") == LUA_TTABLE) {
      const int passes = lua_gettop(L);
      for (int i = 1; i <= array_length(L, passes); ++i) {
        lua_rawgeti(L, passes, i);
        const std::string pass_what = fmt::format("{} pass {}", what, i);
        if (lua_type(L, -1) == LUA_TSTRING) {
          step.passes.push_back(PassSpec{lua_tostring(L, -1), std::nullopt});
        } else if (!lua_istable(L, -1)) {
          throw ConfigError(fmt::format(
              "{} must be an optimization name such as \"bf16\" or a value pass such as "
              "{{batch = 32}} (got {})",
              pass_what, describe_value(L, -1)));
        } else {
          const FieldReader p(L, -1, pass_what, {"name", "value"});
          PassSpec spec;
          spec.name = p.string("name").value_or("");
          if (p.push("value") == LUA_TBOOLEAN)
            spec.value = lua_toboolean(L, -1) ? 1.0 : 0.0;
          else if (lua_type(L, -1) == LUA_TNUMBER)
            spec.value = lua_tonumber(L, -1);
          else if (lua_type(L, -1) != LUA_TNIL)
            throw ConfigError(fmt::format("{}: value must be a number or true/false (got {})",
                                          pass_what, describe_value(L, -1)));
          lua_pop(L, 1);
          step.passes.push_back(spec);
        }
        lua_pop(L, 1);
      }
    } else if (lua_type(L, -1) != LUA_TNIL) {
      throw ConfigError(fmt::format("{}: field 'passes' must be a list (got {})", what,
                                    describe_value(L, -1)));
    }
    lua_pop(L, 1);
  }
  for (const PassSpec& p : step.passes) validate(p);
  return step;
}

void push_step(lua_State* L, const StackStep& s) {
  lua_createtable(L, 0, 3);
  set_string(L, "name", s.name);
  if (!s.where.empty()) set_string(L, "where", s.where);
  lua_createtable(L, static_cast<int>(s.passes.size()), 0);
  for (std::size_t i = 0; i < s.passes.size(); ++i) {
    const PassSpec& p = s.passes[i];
    if (p.value) {
      lua_createtable(L, 0, 2);
      set_string(L, "name", p.name);
      set_number(L, "value", *p.value);
    } else {
      lua_pushlstring(L, p.name.data(), p.name.size());
    }
    lua_rawseti(L, -2, static_cast<int>(i) + 1);
  }
  lua_setfield(L, -2, "passes");
}

ExecuteOptions to_execute(lua_State* L, int index) {
  ExecuteOptions e;
  if (lua_type(L, index) == LUA_TBOOLEAN) {
    e.enabled = lua_toboolean(L, index) != 0;
    return e;
  }
  const FieldReader r(L, index, "execute", {"enabled", "layers", "repeats", "warmup", "min_time"});
  r.read("enabled", e.enabled);
  r.read("layers", e.layers);
  r.read("repeats", e.repeats);
  r.read("warmup", e.warmup);
  r.read("min_time", e.min_time);
  if (e.layers < 0)
    throw ConfigError(fmt::format("execute.layers must be >= 0 (0 = all layers; got {})", e.layers));
  if (e.repeats < 1) throw ConfigError(fmt::format("execute.repeats must be >= 1 (got {})", e.repeats));
  if (e.warmup < 0) throw ConfigError(fmt::format("execute.warmup must be >= 0 (got {})", e.warmup));
  if (!(e.min_time >= 0) || e.min_time > 3600)
    throw ConfigError(fmt::format("execute.min_time must be seconds in [0, 3600] (got {})", e.min_time));
  return e;
}

}  // namespace perfsim::dsl
