// Every error path of the DSL: the message starts with the script's file:line, says what is
// wrong and what to do, suggests the closest name; a wrong value given to a perfsim function is
// that one line, a Lua runtime error carries its traceback too.
#include <doctest/doctest.h>

#include "test_dsl_support.hpp"

using namespace perfsim;
using namespace perfsim::test;

namespace {
// Runs a throw-away script and checks that its error starts with "<file>:<line>: <text>".
void check_error_at(const std::string& name, const std::string& script, int line,
                    const std::string& text) {
  const std::string file = write_script(name, script);
  const std::string msg = script_error(file);
  CAPTURE(msg);
  CHECK(starts_with(msg, file + ":" + std::to_string(line) + ": " + text));
  CHECK(!contains(msg, "\nstack traceback:"));  // the line says where and what to change
}
}  // namespace

TEST_CASE("dsl: unknown fields in constructors suggest the closest field") {
  check_error_at("err_field.lua", "local a = 1\nlocal w = decode { nwe_tokens = 3 }\n", 2,
                 "unknown field 'nwe_tokens' in decode{} (did you mean 'new_tokens'?)");
  check_error_at("err_field2.lua", "local w = train { seq = 8, prompt = 3 }\n", 1,
                 "unknown field 'prompt' in train{}; fields: batch, seq, grad_accum");
  check_error_at("err_model_field.lua", "local m = model('gpt2', { layer = 2 })\n", 1,
                 "unknown field 'layer' in model() overrides (did you mean 'layers'?)");
  check_error_at("err_hw_field.lua", "local h = hardware('L4', { peak_flops = { bf61 = 1 } })\n", 1,
                 "unknown field 'bf61' in hardware() overrides peak_flops (did you mean 'bf16'?)");
  // A multi-line `return scenario {...}` is a tail call: the error points at its first line.
  check_error_at("err_scenario_field.lua", R"(local x = 1

return scenario {
  model = "tiny-llama",
  hardware = "L4",
  workload = decode {},
  stack = {},
}
)",
                 3, "unknown field 'stack' in scenario{} (did you mean 'stacks'?)");
}

TEST_CASE("dsl: wrong types say what was expected") {
  check_error_at("err_type.lua", "local w = decode { batch = 'x' }\n", 1,
                 "decode{}: field 'batch' must be a whole number (got string 'x')");
  check_error_at("err_type2.lua", "local w = decode { kv_cache = 1 }\n", 1,
                 "decode{}: field 'kv_cache' must be true or false (got number 1)");
  check_error_at("err_pass_type.lua", "local s = step('x', {'fp8', 3})\n", 1,
                 "step() pass 2 must be an optimization name such as \"bf16\" or a value pass such "
                 "as {batch = 32} (got number 3)");
  check_error_at("err_paged.lua", "local s = step('+paged', {paged_kv = 0})\n", 1,
                 "optimization 'paged_kv' takes the rows per page, a whole number from 1 to 4096 (got 0)");
  check_error_at("err_type3.lua", "local m = model(42)\n", 1,
                 "model() expects a zoo name such as \"llama-3-8b\" or a table of dimensions (got number 42)");
  check_error_at("err_model_table.lua", "local m = model { layers = 2, hidden = 64, heads = 4 }\n", 1,
                 "model{}: missing field 'ffn_hidden'");
}

TEST_CASE("dsl: unknown names suggest the closest catalog entry") {
  check_error_at("err_model.lua", "local m = model('lama-3-8b')\n", 1,
                 "unknown model 'lama-3-8b' (did you mean 'llama-3-8b'?); known: gpt2,");
  check_error_at("err_hw.lua", "local h = 0\nlocal x = hardware('H100-SXN')\n", 2,
                 "unknown hardware 'H100-SXN' (did you mean 'H100-SXM'?); known: V100,");
  check_error_at("err_hw_list.lua",
                 "return scenario { model = 'tiny-gpt', hardware = {'L4', 'H100-PCI'}, workload = prefill {} }\n",
                 1, "unknown hardware 'H100-PCI' (did you mean 'H100-PCIe'?)");
  check_error_at("err_opt.lua", "local s = step('+fa', 'flash_atention')\n", 1,
                 "unknown optimization 'flash_atention' (did you mean 'flash_attention'?)");
  check_error_at("err_opt_stack.lua",
                 "return scenario { model = 'tiny-gpt', hardware = 'L4', workload = prefill {}, stacks = {'fp9'} }\n",
                 1, "unknown optimization 'fp9' (did you mean 'fp8'?)");
  check_error_at("err_stack.lua", "local s = 1\nlocal x = stacks.decode_clasic\n", 2,
                 "unknown stack 'decode_clasic' (did you mean 'decode_classic'?); known: decode_classic, train_classic");
}

TEST_CASE("dsl: inconsistent models are rejected where they are built") {
  check_error_at("err_heads.lua", "local m = model('llama-3-8b', { heads = 7 })\n", 1,
                 "model 'llama-3-8b': heads (7) must divide hidden (4096)");
  check_error_at("err_kv_heads.lua", "local m = model('llama-3-8b', { kv_heads = 5 })\n", 1,
                 "model 'llama-3-8b': kv_heads (5) must divide heads (32)");
  // Changing only `heads` of a multi-head model keeps it multi-head; a GQA model keeps its
  // key/value heads.
  const std::string heads = write_script(
      "ok_heads.lua",
      "assert(model('gpt2', { heads = 16 }).kv_heads == 16)\n"
      "assert(model('gpt2', { heads = 16, kv_heads = 4 }).kv_heads == 4)\n"
      "assert(model('llama-3-8b', { heads = 64 }).kv_heads == 8)\n");
  CHECK_NOTHROW((void)run_script(heads));
}

TEST_CASE("dsl: inconsistent workloads and scenarios say what to change") {
  check_error_at("err_batch.lua", "local w = decode { batch = 0 }\n", 1,
                 "decode: batch must be > 0 (got 0)");
  check_error_at("err_seq.lua",
                 "return scenario { model = 'llama-3-8b', hardware = 'H100',\n"
                 "  workload = decode { prompt = 8000, new_tokens = 500 } }\n",
                 1, "prompt + new_tokens = 8500 exceeds llama-3-8b's max_seq 8192; lower prompt or new_tokens");
  // A model too big for every listed device is no error: the report says it does not fit.
  const std::string big = write_script(
      "big_weights.lua",
      "return scenario { model = 'gpt-3-175b', hardware = {'H100', 'A100'}, workload = decode {} }\n");
  CHECK_NOTHROW((void)run_script(big));
  check_error_at("err_no_hw.lua", "return scenario { model = 'tiny-gpt', workload = prefill {} }\n", 1,
                 "scenario needs hardware = \"H100-SXM\"");
  check_error_at("err_no_workload.lua", "return scenario { model = 'tiny-gpt', hardware = 'L4' }\n", 1,
                 "scenario{} needs workload = prefill{...}, decode{...} or train{...}");
  check_error_at("err_execute.lua",
                 "return scenario { model = 'tiny-gpt', hardware = 'L4', workload = prefill {},\n"
                 "  execute = { repeats = 0 } }\n",
                 1, "execute.repeats must be between 1 and 10000 (got 0)");
  check_error_at("err_min_time.lua",
                 "return scenario { model = 'tiny-gpt', hardware = 'L4', workload = prefill {},\n"
                 "  execute = { min_time = -1 } }\n",
                 1, "execute.min_time must be seconds in [0, 3600] (got -1)");
}

TEST_CASE("dsl: Lua errors carry file:line and a traceback") {
  const std::string runtime = write_script("err_runtime.lua", "local a = 1\nlocal b = 2\nnope()\n");
  const std::string rmsg = script_error(runtime);
  CHECK(starts_with(rmsg, runtime + ":3: attempt to call global 'nope' (a nil value)\nstack traceback:"));
  const std::string file = write_script("err_nested.lua", R"(local function inner()
  error("broken on purpose")
end
local function outer() inner() end
outer()
)");
  const std::string msg = script_error(file);
  CHECK(starts_with(msg, file + ":2: broken on purpose\nstack traceback:"));
  CHECK(contains(msg, "in function 'inner'"));  // the traceback names the frames
  CHECK(contains(msg, file + ":5: in main chunk"));

  // `return scenario {...}` is a tail call: Lua drops the script's frame. A wrong value given
  // there is still placed at the line where the call starts, on one line.
  const std::string tail = write_script("err_tail.lua", R"(local x = 1
return scenario {
  model = "tiny-llama",
  hardware = "H10",
  workload = decode {},
}
)");
  const std::string tmsg = script_error(tail);
  CHECK(starts_with(tmsg, tail + ":2: unknown hardware 'H10'"));
  CHECK_FALSE(contains(tmsg, "\n"));
  const std::string api = write_script("err_tail_api.lua",
                                       "return perfsim.predict { model = 'tiny-llama', hardware = 'L4',\n"
                                       "  workload = decode { prompt = 300 } }\n");
  const std::string amsg = script_error(api);
  CHECK(starts_with(amsg, api + ":1: prompt + new_tokens = 428 exceeds tiny-llama's max_seq 256"));
  CHECK_FALSE(contains(amsg, "\n"));
  // A runtime error in a function the script passes to perfsim keeps its traceback.
  const std::string cb = write_script("err_in_callback.lua", R"(local function broken() return nil + 1 end
broken()
)");
  CHECK(contains(script_error(cb), "\nstack traceback:"));
}

TEST_CASE("dsl: unreadable or malformed scripts") {
  const std::string syntax = write_script("err_syntax.lua", "local a = 1\nlocal = 2\n");
  CHECK(starts_with(script_error(syntax), syntax + ":2:"));
  const std::string missing = write_script("exists.lua", "") + ".missing";
  CHECK(script_error(missing) == "cannot read script '" + missing + "': no such file");
  const std::string returned = write_script("err_return.lua", "return 42\n");
  CHECK(script_error(returned) ==
        returned + ": the script returned number 42; return scenario{...} or nothing");
}

TEST_CASE("dsl: a whole number too large for an int field, or a non-finite hardware figure, is refused") {
  check_error_at("err_int_wrap.lua", "local h = hardware('H100-SXM', { gpus_per_node = 2^40 })\n", 1,
                 "hardware() overrides: field 'gpus_per_node' = 1099511627776 is beyond 2147483647");
  check_error_at("err_hw_nan.lua", "local h = hardware('H100-SXM', { l2_bytes = 0/0 })\n", 1,
                 "hardware() overrides: l2_bytes must be a finite number >= 0 (got nan)");
}
