// parallel = {...} in a scenario: the fields, the GPU count, the layout passes of stack steps,
// the layout sweep axes, and the one-line errors of a layout that cannot run.
#include <doctest/doctest.h>

#include "test_dsl_support.hpp"

using namespace perfsim;
using namespace perfsim::test;

namespace {

Scenario scenario_of(const std::string& name, const std::string& parallel, const std::string& extra = "") {
  const std::string file = write_script(
      name, "return scenario { model = 'llama-3-8b', hardware = 'H100', workload = train { seq = 1024, "
            "grad_accum = 8 },\n  parallel = " +
                parallel + extra + " }\n");
  const ScriptOutcome out = run_script(file);
  REQUIRE(out.scenario.has_value());
  return *out.scenario;
}

std::string error_of(const std::string& name, const std::string& parallel) {
  const std::string file = write_script(
      name, "return scenario { model = 'llama-3-8b', hardware = 'H100', workload = train { seq = 1024, "
            "grad_accum = 8 },\n  parallel = " +
                parallel + " }\n");
  return script_error(file);
}

}  // namespace

TEST_CASE("dsl parallel: the table's fields, and dp from gpus") {
  const Scenario s = scenario_of("par_fields.lua",
                                 "{ gpus = 64, tp = 4, pp = 2, sp = true, zero = 1, bucket_mb = 50 }");
  CHECK(s.parallel.tp == 4);
  CHECK(s.parallel.pp == 2);
  CHECK(s.parallel.dp == 8);  // 64 / (4 · 2)
  CHECK(s.parallel.sp);
  CHECK(s.parallel.zero == 1);
  CHECK(s.parallel.bucket_bytes == 50.0 * 1024 * 1024);
  CHECK(s.parallel.schedule == PipelineSchedule::one_f_one_b);
  const Scenario fsdp = scenario_of("par_fsdp.lua", "{ dp = 8, fsdp = 'full_shard' }");
  CHECK(fsdp.parallel.sharding_stage() == 3);
  // Two chunks a stage under 1F1B is the interleaved schedule.
  const Scenario chunks = scenario_of("par_chunks.lua", "{ pp = 4, interleave = 2 }");
  CHECK(chunks.parallel.schedule == PipelineSchedule::interleaved);
  // No table: one GPU.
  const std::string file = write_script(
      "par_none.lua", "return scenario { model = 'tiny-llama', hardware = 'H100', workload = train { seq = 128 } }\n");
  CHECK_FALSE(run_script(file).scenario->parallel.parallel());
}

TEST_CASE("dsl parallel: a layout that cannot run is one line naming the field") {
  CHECK(error_of("par_tp.lua", "{ tp = 3 }").find(
            "parallel.tp = 3 does not divide llama-3-8b's 32 attention heads; use tp = 1, 2, 4 or 8") !=
        std::string::npos);
  CHECK(error_of("par_gpus.lua", "{ gpus = 12, tp = 8 }").find(
            "parallel.gpus = 12 is not a multiple of tp · pp · cp = 8 · 1 · 1 = 8; use a multiple of 8 GPUs") !=
        std::string::npos);
  CHECK(error_of("par_product.lua", "{ gpus = 16, tp = 8, dp = 4 }").find(
            "parallel: dp · tp · pp · cp = 4 · 8 · 1 · 1 = 32 GPUs, but gpus = 16") != std::string::npos);
  CHECK(error_of("par_schedule.lua", "{ pp = 2, schedule = '1f1f' }").find(
            "parallel.schedule = \"1f1f\" is not one of gpipe, 1f1b, interleaved (did you mean '1f1b'?)") !=
        std::string::npos);
  CHECK(error_of("par_field.lua", "{ tpp = 2 }").find("tpp") != std::string::npos);
  CHECK(error_of("par_pp.lua", "{ pp = 64 }").find("parallel.pp = 64 is more than llama-3-8b's 32 layers") !=
        std::string::npos);
  CHECK(error_of("par_bucket.lua", "{ dp = 2, bucket_mb = 0 }").find("parallel.bucket_mb must be > 0 MiB") !=
        std::string::npos);
  CHECK(error_of("par_sp.lua", "{ dp = 8, sp = true }").find(
            "parallel.sp = true with tp = 1: sequence parallelism splits the norms and dropout of the "
            "tensor-parallel ranks, and there are none; set tp > 1 or drop sp") != std::string::npos);
}

TEST_CASE("dsl parallel: stack steps change the layout and say which step broke it") {
  const Scenario s = scenario_of("par_steps.lua", "{ gpus = 8 }",
                                 ",\n  stacks = { step('bf16', 'bf16'), step('+fsdp', {zero = 3}), "
                                 "step('+tp', {tp = 2, sp = true}) }");
  CHECK(step_parallel(s.parallel, s.stacks, 0).zero == 0);
  CHECK(step_parallel(s.parallel, s.stacks, 1).zero == 3);
  CHECK(step_parallel(s.parallel, s.stacks, 2).tp == 2);
  CHECK(step_parallel(s.parallel, s.stacks, 2).gpus() == 16);  // dp stays 8
  const std::string file = write_script(
      "par_bad_step.lua",
      "return scenario { model = 'llama-3-8b', hardware = 'H100', workload = train {},\n"
      "  stacks = { step('bf16', 'bf16'), step('+tp', {tp = 5}) } }\n");
  const std::string e = script_error(file);
  CHECK(e.find("step '+tp': parallel.tp = 5 does not divide") != std::string::npos);
  // A step that turns sequence parallelism on without tensor parallelism.
  const std::string sp = write_script(
      "par_sp_step.lua",
      "return scenario { model = 'llama-3-8b', hardware = 'H100', workload = train {},\n"
      "  parallel = { dp = 8 }, stacks = { step('bf16', 'bf16'), step('+sp', {sp = 1}) } }\n");
  CHECK(script_error(sp).find("step '+sp': parallel.sp = true with tp = 1") != std::string::npos);
  // interleave in a step makes 1F1B interleaved; under an explicit GPipe it is the error the
  // table gives, not a silent change of schedule.
  const Scenario chunks = scenario_of("par_chunks_step.lua", "{ pp = 4 }",
                                      ",\n  stacks = { step('bf16', 'bf16'), step('+chunks', {interleave = 2}) }");
  CHECK(step_parallel(chunks.parallel, chunks.stacks, 1).pipeline_schedule() == PipelineSchedule::interleaved);
  const std::string gpipe = write_script(
      "par_gpipe_step.lua",
      "return scenario { model = 'llama-3-8b', hardware = 'H100', workload = train { grad_accum = 8 },\n"
      "  parallel = { pp = 4, schedule = 'gpipe' },\n"
      "  stacks = { step('bf16', 'bf16'), step('+chunks', {interleave = 2}) } }\n");
  CHECK(script_error(gpipe).find("step '+chunks': parallel.interleave = 2 needs schedule = \"interleaved\"") !=
        std::string::npos);
}

TEST_CASE("dsl parallel: gpus and the degrees are sweep axes") {
  const std::string file = write_script("par_sweep.lua", R"(
return scenario {
  model = 'llama-3-8b', hardware = 'H100', workload = train { seq = 1024 },
  parallel = { tp = 2 },
  sweep = { gpus = {2, 8, 32}, zero = {0, 3} },
}
)");
  const ScriptOutcome out = run_script(file);
  REQUIRE(out.points.size() == 6);
  // zero is the outer axis; gpus = N keeps tp = 2 and derives dp.
  const std::pair<int, int> dp_zero[] = {{1, 0}, {4, 0}, {16, 0}, {1, 3}, {4, 3}, {16, 3}};
  for (std::size_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(out.points[i].scenario.parallel.dp == dp_zero[i].first);
    CHECK(out.points[i].scenario.parallel.zero == dp_zero[i].second);
    CHECK(out.points[i].scenario.parallel.tp == 2);
  }
  const std::string bad = write_script("par_sweep_bad.lua", R"(
return scenario {
  model = 'llama-3-8b', hardware = 'H100', workload = train { seq = 1024 },
  parallel = { tp = 4 }, sweep = { gpus = {4, 6} },
}
)");
  CHECK(script_error(bad).find("sweep.gpus = 6 is not a multiple of tp · pp · cp = 4 · 1 · 1 = 4") !=
        std::string::npos);
  const std::string decode = write_script("par_sweep_decode.lua", R"(
return scenario { model = 'llama-3-8b', hardware = 'H100', workload = decode {}, sweep = { zero = {0, 1} } }
)");
  CHECK(script_error(decode).find("sweep key 'zero' does not apply to a decode workload") != std::string::npos);
}
