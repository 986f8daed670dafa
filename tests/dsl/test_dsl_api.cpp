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

TEST_CASE("dsl: perfsim.collective_time prices one collective on a hardware or a profile") {
  const std::string file = write_script("api_collective.lua", R"(
local function near(a, b) return math.abs(a - b) <= 1e-9 * math.max(1, math.abs(b)) end
-- H100-SXM: NVLink 450 GB/s x 0.8 communication efficiency, 2 us a message. An 8-GPU
-- all-reduce of 1 GB: 14 messages and 2 x 7/8 GB on the wire = 28 us + 1.75 GB / 360 GB/s.
local t = perfsim.collective_time { collective = "all_reduce", gpus = 8, bytes = 1e9, hardware = "H100-SXM" }
assert(near(t, 28e-6 + 1.75e9 / 360e9), "all_reduce on the datasheet: " .. t)
-- 16 GPUs cross two HGX nodes: 30 messages at InfiniBand's 5 us, 2 x 15/16 GB at
-- min(NVLink 450, 8 NICs x 50) x 0.8 = 320 GB/s.
t = perfsim.collective_time { collective = "all_reduce", gpus = 16, bytes = 1e9, hardware = "H100-SXM" }
assert(near(t, 30 * 5e-6 + 1.875e9 / 320e9), "all_reduce across nodes: " .. t)
assert(hardware("H100-SXM").gpus_per_node == 8 and hardware("L4").gpus_per_node == 0, "gpus_per_node")
assert(perfsim.collective_time { collective = "all_gather", gpus = 1, bytes = 1e9, hardware = "H100" } == 0,
       "one GPU sends nothing")
-- A calibrated fit for all_reduce over 2 GPUs: the line between its measured sizes.
local p = profile { name = "two-gpus", base = "H100-SXM",
  collectives = { all_reduce = { [2] = { bytes = {1e6, 3e6}, seconds = {10e-6, 30e-6} } } } }
assert(near(perfsim.collective_time { collective = "all_reduce", gpus = 2, bytes = 2e6, hardware = p }, 20e-6),
       "between the fitted sizes")
-- Groups the profile did not fit use its links.
local h = hardware "H100-SXM"
assert(near(perfsim.collective_time { collective = "send_recv", gpus = 4, bytes = 1e6, hardware = p },
            perfsim.collective_time { collective = "send_recv", gpus = 4, bytes = 1e6, hardware = h }))
)");
  CHECK_NOTHROW((void)run_script(file));

  // Errors name the script's line and what to fix.
  const auto error_of = [](const std::string& name, const std::string& call) {
    return script_error(write_script(name, "return perfsim.collective_time { " + call + " }\n"));
  };
  const std::string typo = error_of("api_collective_typo.lua", "collective = 'all_reduse', gpus = 2, bytes = 1, hardware = 'H100'");
  CHECK(typo.find("api_collective_typo.lua:1: perfsim.collective_time{}: collective 'all_reduse' is not one of "
                  "all_reduce, all_gather, reduce_scatter, all_to_all, send_recv (did you mean 'all_reduce'?)") !=
        std::string::npos);
  CHECK(error_of("api_collective_missing.lua", "collective = 'all_reduce', gpus = 2").find(
            "perfsim.collective_time{} needs collective, gpus, bytes and hardware") != std::string::npos);
  CHECK(error_of("api_collective_zero.lua", "collective = 'all_reduce', gpus = 0, bytes = 1, hardware = 'H100'")
            .find("gpus must be >= 1 (got 0)") != std::string::npos);
  CHECK(error_of("api_collective_nolink.lua", "collective = 'all_reduce', gpus = 2, bytes = 1, hardware = 'host-cpu'")
            .find("hardware 'host-cpu' has no link for all_reduce over 2 GPUs") != std::string::npos);
}
