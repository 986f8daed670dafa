// Lua tables <-> core structs: models, hardware, workloads, stack steps, execute options.
// Field names in Lua are the C++ member names; docs/DSL.md lists them.
#pragma once
#include <lua.hpp>

#include <string>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/graph/op_kind.hpp"
#include "core/passes/passes.hpp"
#include "core/run/scenario.hpp"
#include "core/config/model.hpp"
#include "core/config/workload.hpp"

namespace perfsim::dsl {

// Fields a model table may carry (plus "aliases" in catalog entries).
[[nodiscard]] const std::vector<std::string>& model_fields();
// Applies the fields present in the table at `index` onto `m` (used for overrides).
void read_model_fields(lua_State* L, int index, ModelConfig& m, const std::string& what);
// A model from a complete table; layers, hidden, heads, ffn_hidden, vocab and max_seq are required.
[[nodiscard]] ModelConfig to_model(lua_State* L, int index, const std::string& what);
void push_model(lua_State* L, const ModelConfig& m);

// A collective by name ("all_reduce", ...); a ConfigError naming `what`, the known names and
// the closest one otherwise.
[[nodiscard]] Collective to_collective(const std::string& name, const std::string& what);

[[nodiscard]] const std::vector<std::string>& hardware_fields();
void read_hardware_fields(lua_State* L, int index, Hardware& hw, const std::string& what);
// A hardware profile from a complete table; name, peak_flops, memory_bytes and
// memory_bandwidth are required.
[[nodiscard]] Hardware to_hardware(lua_State* L, int index, const std::string& what);
void push_hardware(lua_State* L, const Hardware& hw);

// The fields a workload constructor of this phase accepts.
[[nodiscard]] const std::vector<std::string>& workload_fields(Phase p);
// A workload of a known phase (the prefill/decode/train constructors); defaults from Workload.
[[nodiscard]] Workload to_workload(lua_State* L, int index, Phase phase, const std::string& what);
// A workload table carrying its phase ("phase = 'decode'"), as the constructors return it.
[[nodiscard]] Workload to_workload(lua_State* L, int index, const std::string& what);
void push_workload(lua_State* L, const Workload& w);

// A step: a table {name = ..., passes = {"bf16", {name = "batch", value = 32}}}, or a string
// naming one optimization (the step is named after it). Each pass is validated.
[[nodiscard]] StackStep to_step(lua_State* L, int index, const std::string& what);
void push_step(lua_State* L, const StackStep& s);

// `execute = false`, or {enabled, layers, repeats, warmup}.
[[nodiscard]] ExecuteOptions to_execute(lua_State* L, int index);

}  // namespace perfsim::dsl
