// Scripts to structs: every field of scenario{} and its constructors, returned versus
// declared scenarios, plain scripts, the sandbox and the module search path.
#include <doctest/doctest.h>

#include <cstdlib>

#include "test_dsl_support.hpp"

using namespace perfsim;
using namespace perfsim::test;

TEST_CASE("dsl: a scenario with every field set converts field by field") {
  const std::string file = dsl_fixture("full_scenario.lua");
  const ScriptOutcome out = run_script(file);
  REQUIRE(out.scenario.has_value());
  const Scenario& s = *out.scenario;
  CHECK(s.name == "full");
  CHECK(s.description == "every field set");
  CHECK(s.file == file);

  // llama-3-8b from the zoo with two overrides.
  CHECK(s.model.name == "llama-3-8b");
  CHECK(s.model.layers == 4);
  CHECK(s.model.hidden == 4096);
  CHECK(s.model.heads == 32);
  CHECK(s.model.kv_heads == 8);
  CHECK(s.model.ffn_hidden == 14336);
  CHECK(s.model.vocab == 128256);
  CHECK(s.model.max_seq == 4096);
  CHECK(s.model.activation == Activation::swiglu);
  CHECK(s.model.norm == NormKind::rmsnorm);
  CHECK(s.model.rope);
  CHECK_FALSE(s.model.tied_embeddings);
  CHECK_FALSE(s.model.bias);

  REQUIRE(s.hardware.size() == 3);
  CHECK(s.hardware[0].name == "H100-SXM");  // alias "h100"
  CHECK(s.hardware[1].name == "A100-80GB");
  CHECK(s.hardware[1].memory_bytes == 40e9);             // overridden
  CHECK(s.hardware[1].peak(DType::bf16) == 312e12);      // kept from the catalog
  CHECK(s.hardware[1].memory_bandwidth == 2039e9);
  const Hardware& toy = s.hardware[2];
  CHECK(toy.name == "toy");
  CHECK(toy.kind == "gpu");
  CHECK(toy.peak(DType::fp32) == 1e12);
  CHECK(toy.peak(DType::bf16) == 4e12);
  CHECK(toy.peak(DType::fp8) == 0);
  CHECK(toy.memory_bytes == 8e9);
  CHECK(toy.memory_bandwidth == 1e11);
  CHECK(toy.compute_efficiency.empty());
  CHECK_FALSE(toy.calibrated);

  CHECK(s.workload.phase == Phase::decode);
  CHECK(s.workload.batch == 4);
  CHECK(s.workload.prompt == 256);
  CHECK(s.workload.new_tokens == 64);
  CHECK(s.workload.kv_cache);

  REQUIRE(s.stacks.size() == 4);
  CHECK(s.stacks[0].name == "baseline");
  REQUIRE(s.stacks[0].passes.size() == 1);
  CHECK(s.stacks[0].passes[0].name == "bf16");
  CHECK_FALSE(s.stacks[0].passes[0].value.has_value());
  REQUIRE(s.stacks[1].passes.size() == 2);
  CHECK(s.stacks[1].passes[0].name == "flash_attention");
  CHECK(s.stacks[1].passes[1].name == "cuda_graphs");
  REQUIRE(s.stacks[2].passes.size() == 1);
  CHECK(s.stacks[2].passes[0].name == "batch");
  CHECK(s.stacks[2].passes[0].value == 16.0);
  REQUIRE(s.stacks[3].passes.size() == 1);
  CHECK(s.stacks[3].passes[0].name == "kv_cache");
  CHECK(s.stacks[3].passes[0].value == 0.0);  // false

  CHECK(s.execute.enabled);
  CHECK(s.execute.layers == 2);
  CHECK(s.execute.repeats == 3);
  CHECK(s.execute.warmup == 2);
  CHECK(s.execute.min_time == 0.25);
  CHECK(s.sweep.empty());

  // Without a sweep: one point, no values, the same scenario.
  REQUIRE(out.points.size() == 1);
  CHECK(out.points[0].values.empty());
  CHECK(out.points[0].scenario.name == "full");
  CHECK(out.points[0].scenario.workload.batch == 4);
  CHECK(out.options.empty());
}

TEST_CASE("dsl: train workload, named stack, model table and execute = false") {
  const ScriptOutcome out = run_script(dsl_fixture("train.lua"));
  REQUIRE(out.scenario.has_value());
  const Scenario& s = *out.scenario;
  CHECK(s.name == "train");  // the script's file name without .lua
  CHECK(s.model.name == "mini");
  CHECK(s.model.layers == 4);
  CHECK(s.model.kv_heads == 8);  // not given: the constructor fills in heads
  CHECK(s.model.activation == Activation::gelu);
  CHECK(s.model.norm == NormKind::layernorm);
  CHECK(s.hardware.at(0).name == "A100-80GB");  // "A100" alias
  CHECK(s.workload.phase == Phase::train);
  CHECK(s.workload.batch == 2);
  CHECK(s.workload.seq == 512);
  CHECK(s.workload.grad_accum == 4);
  REQUIRE(s.stacks.size() == 5);
  CHECK(s.stacks[0].name == "baseline fp32");
  CHECK(s.stacks[0].passes.empty());
  CHECK(s.stacks[1].passes.at(0).name == "bf16");
  CHECK(s.stacks[2].passes.at(0).name == "fused_optimizer");
  CHECK(s.stacks[3].passes.at(0).name == "fusion");
  CHECK(s.stacks[4].passes.at(0).name == "recompute");
  CHECK_FALSE(s.execute.enabled);
  CHECK(s.execute.layers == ExecuteOptions{}.layers);
}

TEST_CASE("dsl: the last scenario{} call wins when the script returns nothing") {
  const ScriptOutcome out = run_script(dsl_fixture("declared.lua"));
  REQUIRE(out.scenario.has_value());
  CHECK(out.scenario->name == "second");
  CHECK(out.scenario->workload.phase == Phase::prefill);
  CHECK(out.scenario->workload.batch == 3);
  CHECK(out.scenario->workload.prompt == 32);
  CHECK(out.scenario->hardware.at(0).name == "L4");
  CHECK(out.points.size() == 1);
}

TEST_CASE("dsl: a returned scenario wins over an earlier declared one; plain tables work") {
  const std::string a = write_script("returned.lua", R"(
scenario { name = "declared", model = "tiny-gpt", hardware = "L4", workload = prefill {} }
return scenario { name = "returned", model = "tiny-gpt", hardware = "L4", workload = prefill {} }
)");
  CHECK(run_script(a).scenario->name == "returned");
  const std::string b = write_script("plain_table.lua", R"(
return { name = "plain", model = "tiny-llama", hardware = "H200",
         workload = decode { batch = 2, prompt = 8, new_tokens = 8 } }
)");
  const ScriptOutcome out = run_script(b);
  REQUIRE(out.scenario.has_value());
  CHECK(out.scenario->name == "plain");
  CHECK(out.scenario->model.name == "tiny-llama");
  CHECK(out.scenario->hardware.at(0).name == "H200");
  CHECK(out.scenario->workload.batch == 2);
}

TEST_CASE("dsl: a plain script runs and yields no scenario") {
  const ScriptOutcome out = run_script(dsl_fixture("plain.lua"));
  CHECK_FALSE(out.scenario.has_value());
  CHECK(out.points.empty());
  CHECK(out.options.empty());
}

TEST_CASE("dsl: constructors return inspectable tables") {
  // The script checks the tables it gets; a wrong value fails its assert.
  const std::string file = write_script("inspect.lua", R"(
local m = model("gpt2")
assert(m.hidden == 768 and m.heads == 12 and m.vocab == 50257 and m.tied_embeddings)
local h = hardware("l4")
assert(h.name == "L4" and h.peak_flops.bf16 == 121e12 and h.memory_bytes == 24e9)
local w = decode { batch = 3 }
assert(w.phase == "decode" and w.batch == 3 and w.prompt == 128 and w.new_tokens == 128)
local t = train {}
assert(t.phase == "train" and t.seq == 1024 and t.grad_accum == 1)
local s = step("+b", {batch = 8}, "fusion")
assert(s.name == "+b" and s.passes[1].name == "batch" and s.passes[1].value == 8)
assert(s.passes[2] == "fusion")
)");
  CHECK_NOTHROW((void)run_script(file));
}

TEST_CASE("dsl: sandbox removes process and native access but keeps reading files") {
  CHECK_NOTHROW((void)run_script(dsl_fixture("sandbox.lua")));
  const std::string file = write_script("needs_ffi.lua", "local x = 1\nlocal ffi = require 'ffi'\n");
  const std::string msg = script_error(file);
  CHECK(starts_with(msg, file + ":2: module 'ffi' is not available to scripts (native code is never loaded, even with --unsafe)"));
  const std::string exec = write_script("exec.lua", "os.execute('true')\n");
  CHECK(starts_with(script_error(exec), exec + ":1: os.execute is not available to scripts (scripts cannot start programs or change files; run with --unsafe to allow it)"));
}

TEST_CASE("dsl: module_path overrides a stdlib module") {
  DslSettings settings;
  settings.module_path = dsl_fixture("modpath");
  const ScriptOutcome out = run_script(dsl_fixture("modpath_user.lua"), settings);
  REQUIRE(out.scenario.has_value());
  CHECK(out.scenario->model.name == "my-model");
  CHECK(out.scenario->model.hidden == 128);
  CHECK(out.scenario->hardware.at(0).name == "L4");  // hardware.lua still from the stdlib
  // Without the override the zoo has no such model.
  const std::string msg = script_error(dsl_fixture("modpath_user.lua"));
  CHECK(contains(msg, "unknown model 'mine'"));
}

TEST_CASE("dsl: PERFSIM_PATH is searched after module_path") {
  ::setenv("PERFSIM_PATH", dsl_fixture("modpath").c_str(), 1);
  const ModelConfig m = find_model("my-model");
  ::unsetenv("PERFSIM_PATH");
  CHECK(m.layers == 2);
  CHECK(m.kv_heads == 2);
  CHECK_THROWS_AS((void)find_model("my-model"), ConfigError);
}

TEST_CASE("dsl: a script named like a runtime module still runs as a script") {
  const std::string file = write_script("perfsim.lua", R"(
return scenario { name = "named_perfsim", model = "tiny-gpt", hardware = "L4", workload = prefill {},
                  stacks = { step("bf16", "bf16") } }
)");
  const ScriptOutcome out = run_script(file);
  REQUIRE(out.scenario.has_value());
  CHECK(out.scenario->name == "named_perfsim");
  CHECK(out.scenario->stacks.size() == 1);
}

TEST_CASE("dsl: alibi in model{} and recompute's word in a step") {
  const std::string file = write_script("alibi_selective.lua", R"(
local m = model("gpt2", {alibi = true, layers = 2})
assert(m.alibi == true and m.rope == false, "model() fills alibi in")
return scenario {
  name = "alibi", model = m, hardware = "H100",
  workload = train { batch = 1, seq = 512 },
  stacks = { step("sel", "bf16", {recompute = "selective"}), step("+full", "recompute") },
}
)");
  const ScriptOutcome out = run_script(file);
  REQUIRE(out.scenario.has_value());
  const Scenario& s = *out.scenario;
  CHECK(s.model.alibi);
  REQUIRE(s.stacks.size() == 2);
  REQUIRE(s.stacks[0].passes.size() == 2);
  CHECK(s.stacks[0].passes[1].name == "recompute");
  CHECK(s.stacks[0].passes[1].text == "selective");
  CHECK_FALSE(s.stacks[1].passes[0].text.has_value());
  // A word recompute does not take, and both position schemes at once, are errors.
  CHECK(contains(script_error(write_script("bad_recompute.lua", R"(
return scenario { model = "gpt2", hardware = "H100", workload = train { batch = 1, seq = 64 },
  stacks = { step("x", {recompute = "partial"}) } }
)")),
                 "optimization 'recompute' takes one of full, selective"));
  CHECK(contains(script_error(write_script("rope_alibi.lua", R"(
return scenario { model = model("llama-3-8b", {alibi = true}), hardware = "H100",
  workload = train { batch = 1, seq = 64 } }
)")),
                 "rope and alibi are two ways of placing positions"));
}
