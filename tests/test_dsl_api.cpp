// perfsim.predict{} and perfsim.measure{} from inside scripts: one row per step and sweep
// point, with the fields docs/DSL.md lists. The scripts assert on the rows they get.
#include <doctest/doctest.h>

#include "test_dsl_support.hpp"

using namespace perfsim;
using namespace perfsim::test;

TEST_CASE("dsl: perfsim.predict returns one row per step and sweep point") {
  const std::string file = write_script("api_predict.lua", R"(
local rows = perfsim.predict {
  model = "tiny-llama", hardware = {"H100", "L4"},
  workload = decode { batch = 2, prompt = 16, new_tokens = 8 },
  stacks = { step("baseline", "bf16"), step("+fa", "flash_attention") },
  sweep = { batch = {1, 4} },
}
assert(#rows == 4, "2 points x 2 steps, got " .. #rows)
local r = rows[1]
assert(r.step == "baseline" and rows[2].step == "+fa", "steps in order")
assert(r.hardware == "H100-SXM", "first hardware is the target")
assert(r.sweep.batch == 1 and rows[3].sweep.batch == 4, "sweep values as numbers")
assert(r.speedup == 1, "the first step is the speedup base")
assert(r.time > 0 and r.flops > 0 and r.memory > 0 and r.fits == true)
-- decode: one token per sequence per step, so tokens/s x time = batch
assert(math.abs(rows[3].tokens_per_s * rows[3].time - 4) < 1e-9, "tokens_per_s = batch / time")
assert(r.by_class.gemm > 0, "gemm time")
assert(type(r.not_executed) == "string" and r.measured_time == nil, "nothing measured")
assert(#r.what_if == 1 and r.what_if[1].hardware == "L4" and r.what_if[1].time > 0, "what-if")
)");
  CHECK_NOTHROW((void)run_script(file));
}

TEST_CASE("dsl: perfsim.measure pairs rows with the backend") {
  const std::string file = write_script("api_measure.lua", R"(
local rows = perfsim.measure {
  model = "tiny-gpt", hardware = "H100", backend = "cpu",
  workload = prefill { batch = 1, prompt = 8, new_tokens = 8 },
  stacks = { step("fp32") },
  execute = { layers = 1, repeats = 1, warmup = 0 },
}
assert(#rows == 1)
local r = rows[1]
assert(r.hardware == "host-cpu", "paired with the executing device, got " .. tostring(r.hardware))
assert((r.measured_time ~= nil and r.measured_time > 0 and r.error ~= nil) or type(r.not_executed) == "string")
)");
  CHECK_NOTHROW((void)run_script(file));
  const std::string bad = write_script("api_backend.lua", R"(local x = 1
local rows = perfsim.measure { model = "tiny-gpt", hardware = "H100", workload = prefill {}, backend = "cpx" }
)");
  const std::string msg = script_error(bad);
  CHECK(starts_with(msg, bad + ":2: unknown backend 'cpx' (did you mean 'cpu'?)"));
}

TEST_CASE("dsl: errors keep the full path of long script names") {
  const auto dir = script_dir() / "a_directory_with_a_rather_long_name" / "and_another_long_one";
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "script_with_a_long_name.lua").string();
  std::ofstream(file) << "local a = 1\nnope()\n";
  CHECK(starts_with(script_error(file), file + ":2: attempt to call global 'nope'"));
}
