// Lua tables <-> ModelConfig, Workload, StackStep and ExecuteOptions (hardware is in
// lua_hardware.cpp). Readers reject unknown fields and wrong types with the table's name.
#include "dsl/lua_convert.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/text.hpp"
#include "dsl/lua_cnn_model.hpp"
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

const ScalarFields<ModelConfig>& model_scalars() {
  static const ScalarFields<ModelConfig> f = {
      {"name", &ModelConfig::name},         {"layers", &ModelConfig::layers},
      {"hidden", &ModelConfig::hidden},     {"heads", &ModelConfig::heads},
      {"kv_heads", &ModelConfig::kv_heads}, {"ffn_hidden", &ModelConfig::ffn_hidden},
      {"vocab", &ModelConfig::vocab},       {"max_seq", &ModelConfig::max_seq},
      {"rope", &ModelConfig::rope},         {"alibi", &ModelConfig::alibi},
      {"tied_embeddings", &ModelConfig::tied_embeddings},
      {"bias", &ModelConfig::bias},         {"experts", &ModelConfig::experts},
      {"top_k", &ModelConfig::top_k},       {"expert_ffn_hidden", &ModelConfig::expert_ffn_hidden},
      {"shared_experts", &ModelConfig::shared_experts},
      {"capacity_factor", &ModelConfig::capacity_factor}};
  return f;
}

// Every phase's fields; a phase's reader accepts only its own (workload_fields).
const ScalarFields<Workload>& workload_scalars() {
  static const ScalarFields<Workload> f = {
      {"batch", &Workload::batch}, {"prompt", &Workload::prompt},       {"new_tokens", &Workload::new_tokens},
      {"kv_cache", &Workload::kv_cache}, {"seq", &Workload::seq}, {"grad_accum", &Workload::grad_accum},
      {"cached", &Workload::cached}};
  return f;
}

const ScalarFields<ExecuteOptions>& execute_scalars() {
  static const ScalarFields<ExecuteOptions> f = {{"enabled", &ExecuteOptions::enabled},
                                                 {"layers", &ExecuteOptions::layers},
                                                 {"repeats", &ExecuteOptions::repeats},
                                                 {"warmup", &ExecuteOptions::warmup},
                                                 {"min_time", &ExecuteOptions::min_time},
                                                 {"serve_seconds", &ExecuteOptions::serve_seconds}};
  return f;
}

}  // namespace

Collective to_collective(const std::string& name, const std::string& what) {
  std::vector<std::pair<std::string, Collective>> choices;
  for (Collective c : all_collectives) choices.emplace_back(std::string(name_of(c)), c);
  return parse_choice(name, choices, what, "collective");
}

const std::vector<std::string>& model_fields() {
  static const std::vector<std::string> f = [] {
    std::vector<std::string> keys = model_scalars().keys();
    keys.insert(keys.end(), {"kind", "activation", "norm", "aliases"});
    return keys;
  }();
  return f;
}

void read_model_fields(lua_State* L, int index, ModelConfig& m, const std::string& what) {
  if (m.cnn) {  // overrides of an image model
    read_cnn_fields(L, index, *m.cnn, what);
    m.name = m.cnn->name;
    return;
  }
  const FieldReader r(L, index, what, model_fields());
  model_scalars().read(r, m);
  if (auto a = r.string("activation")) m.activation = parse_choice(*a, activations, what, "activation");
  if (auto n = r.string("norm")) m.norm = parse_choice(*n, norms, what, "norm");
}

ModelConfig to_model(lua_State* L, int index, const std::string& what) {
  ModelConfig m;
  m.name = "custom";
  if (is_cnn_table(L, index, what)) {
    CnnConfig c;
    c.name = "custom";
    c.stages.clear();
    read_cnn_fields(L, index, c, what);
    if (c.stages.empty())
      throw ConfigError(fmt::format("{}: missing field 'stages' (an image model needs its stages, e.g. "
                                    "stages = {{{{3, 64, 1}}, {{4, 128, 2}}}}; or use a zoo name such as "
                                    "model(\"resnet-50\"))",
                                    what));
    m.name = c.name;
    m.cnn = std::move(c);
    return m;
  }
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
  if (m.cnn) {
    push_cnn_model(L, *m.cnn);
    return;
  }
  lua_createtable(L, 0, 19);
  model_scalars().push(L, m);
  set_number(L, "kv_heads", static_cast<double>(m.kv_heads_or_heads()));  // 0 reads as "= heads"
  set_string(L, "activation", m.activation == Activation::gelu ? "gelu" : "swiglu");
  set_string(L, "norm", m.norm == NormKind::layernorm ? "layernorm" : "rmsnorm");
}

const std::vector<std::string>& workload_fields(Phase p) {
  // new_tokens sizes the KV cache the prefill writes (the generation that follows).
  // cached: leading prompt tokens already in the KV cache (a shared prefix, earlier chunks).
  static const std::vector<std::string> prefill = {"batch", "prompt", "new_tokens", "cached"};
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
  workload_scalars().read(r, w);
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
      if (w.cached > 0) set_number(L, "cached", static_cast<double>(w.cached));
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
          else if (lua_type(L, -1) == LUA_TSTRING)
            spec.text = lua_tostring(L, -1);
          else if (lua_type(L, -1) != LUA_TNIL)
            throw ConfigError(fmt::format("{}: value must be a number, true/false or a word (got {})",
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
    if (p.value || p.text) {
      lua_createtable(L, 0, 2);
      set_string(L, "name", p.name);
      if (p.text) set_string(L, "value", *p.text);
      else set_number(L, "value", *p.value);
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
  const FieldReader r(L, index, "execute", execute_scalars().keys());
  execute_scalars().read(r, e);
  if (e.layers < 0)
    throw ConfigError(fmt::format("execute.layers must be >= 0 (0 = all layers; got {})", e.layers));
  if (e.repeats < 1 || e.repeats > max_execute_runs)
    throw ConfigError(fmt::format("execute.repeats must be between 1 and {} (got {})", max_execute_runs, e.repeats));
  if (e.warmup < 0 || e.warmup > max_execute_runs)
    throw ConfigError(fmt::format("execute.warmup must be between 0 and {} (got {})", max_execute_runs, e.warmup));
  if (!(e.min_time >= 0) || e.min_time > 3600)
    throw ConfigError(fmt::format("execute.min_time must be seconds in [0, 3600] (got {})", e.min_time));
  if (!(e.serve_seconds >= 0) || e.serve_seconds > 86400)
    throw ConfigError(fmt::format("execute.serve_seconds must be seconds in [0, 86400] (got {})", e.serve_seconds));
  return e;
}

}  // namespace perfsim::dsl
