// perfsim.search{} from inside scripts: the top layouts as rows with the fields docs/DSL.md
// lists, the counts of pruned layouts, and one-line errors naming the field.
#include <doctest/doctest.h>

#include "core/errors.hpp"
#include "test_dsl_support.hpp"

using namespace perfsim;
using namespace perfsim::test;

TEST_CASE("dsl: perfsim.search ranks the layouts of a scenario{}") {
  // tiny-llama: 2 layers, 4 heads, 2 KV heads; global batch 1 · 8 · 1 = 8 sequences.
  const std::string file = write_script("api_search.lua", R"(
local s = scenario {
  model = "tiny-llama", hardware = "H100",
  workload = train { batch = 1, seq = 128, grad_accum = 8 },
  stacks = { step("bf16", "bf16") },
}
local r = perfsim.search { scenario = s, gpus = 8, top = 5 }
assert(#r == 5, "top 5 rows, got " .. #r)
assert(r.counts.enumerated == 256, "enumerated " .. r.counts.enumerated)
assert(r.counts.evaluated == 52 and r.counts.fitting == 52, "priced " .. r.counts.evaluated)
assert(r.counts.pruned.batch_split == 84 and r.counts.pruned.tp_split == 56, "pruned by reason")
assert(r.counts.pruned.too_many_chunks == 64 and r.counts.pruned.does_not_fit == 0)
assert(r.gpus == 8 and r.global_batch == 8 and r.hardware == "H100-SXM" and r.model == "tiny-llama")
for i, row in ipairs(r) do
  assert(row.rank == i)
  assert(row.layout.gpus == 8, "layout as parallel{} reads it")
  assert(row.layout.dp * row.micro_batch * row.grad_accum == 8, "the global batch is kept")
  assert(type(row.describe) == "string" and row.fits == true and row.recompute == false)
  assert(row.tokens_per_s > 0 and row.step_time > 0 and row.memory > 0 and row.mfu > 0)
  assert(row.limiter == "compute" or row.limiter == "memory" or row.limiter == "bubble"
         or row.limiter == "communication")
  if i > 1 then assert(r[i - 1].tokens_per_s >= row.tokens_per_s, "ranked by tokens/s") end
end
-- A plain table of scenario fields works too; the options narrow the space.
local n = perfsim.search {
  scenario = { model = "tiny-llama", hardware = "H100", workload = train { seq = 128, grad_accum = 8 } },
  gpus = 8, tp = 2, pp = {1}, zero = {0}, micro_batch = {2}, recompute = true,
}
assert(n.counts.enumerated == 4, "sp off/on x recompute off/on, got " .. n.counts.enumerated)
assert(#n == 4 and n[1].layout.tp == 2 and n[1].layout.dp == 4 and n[1].grad_accum == 1)
)");
  CHECK_NOTHROW((void)run_script(file));
}

TEST_CASE("dsl: perfsim.search errors name the field") {
  const std::string no_gpus = write_script("api_search_no_gpus.lua", R"(
local s = scenario { model = "tiny-llama", hardware = "H100", workload = train { seq = 128 } }
perfsim.search { scenario = s }
)");
  CHECK_THROWS_WITH_AS((void)run_script(no_gpus),
                       doctest::Contains("perfsim.search{} needs gpus = N: the scenario lays its step out on a "
                                         "single GPU"),
                       ScriptError);
  const std::string bad_list = write_script("api_search_bad_list.lua", R"(
local s = scenario { model = "tiny-llama", hardware = "H100", workload = train { seq = 128 } }
perfsim.search { scenario = s, gpus = 8, tp = "eight" }
)");
  CHECK_THROWS_WITH_AS((void)run_script(bad_list),
                       doctest::Contains("perfsim.search{} tp must be a whole number or a list of them"), ScriptError);
  const std::string no_scenario = write_script("api_search_no_scenario.lua", R"(
perfsim.search { gpus = 8 }
)");
  CHECK_THROWS_WITH_AS((void)run_script(no_scenario),
                       doctest::Contains("perfsim.search{} needs scenario = a table returned by scenario{...}"),
                       ScriptError);
}
