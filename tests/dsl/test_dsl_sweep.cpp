// Sweep expansion (count, order, values) and the Lua sweep helpers grid, range, geomspace.
#include <doctest/doctest.h>

#include "test_dsl_support.hpp"

using namespace perfsim;
using namespace perfsim::test;

TEST_CASE("dsl: a sweep expands to the cartesian product, hardware outermost") {
  const ScriptOutcome out = run_script(dsl_fixture("sweep.lua"));
  REQUIRE(out.scenario.has_value());
  // The base scenario keeps its axes, in expansion order, with canonical names.
  REQUIRE(out.scenario->sweep.size() == 2);
  CHECK(out.scenario->sweep[0].key == "hardware");
  CHECK(out.scenario->sweep[0].values == std::vector<std::string>{"H100-SXM", "A100-80GB"});
  CHECK(out.scenario->sweep[1].key == "batch");
  CHECK(out.scenario->sweep[1].values == std::vector<std::string>{"1", "8", "32"});

  REQUIRE(out.points.size() == 6);
  const std::pair<const char*, int64_t> expected[] = {{"H100-SXM", 1},  {"H100-SXM", 8},
                                                      {"H100-SXM", 32}, {"A100-80GB", 1},
                                                      {"A100-80GB", 8}, {"A100-80GB", 32}};
  for (std::size_t i = 0; i < 6; ++i) {
    const ScenarioPoint& p = out.points[i];
    CAPTURE(i);
    CHECK(p.values.size() == 2);
    CHECK(p.values.at("hardware") == expected[i].first);
    CHECK(p.values.at("batch") == std::to_string(expected[i].second));
    REQUIRE(p.scenario.hardware.size() == 1);
    CHECK(p.scenario.hardware[0].name == expected[i].first);
    CHECK(p.scenario.workload.batch == expected[i].second);
    CHECK(p.scenario.workload.prompt == 32);  // untouched fields stay
    CHECK(p.scenario.sweep.empty());          // points carry no sweep of their own
  }
}

TEST_CASE("dsl: sweep over model, kv_cache and a single value") {
  const std::string file = write_script("sweep_models.lua", R"(
return scenario {
  model = "tiny-llama", hardware = "L4",
  workload = decode { prompt = 16, new_tokens = 8 },
  sweep = { model = {"tiny-gpt", "tiny-llama"}, kv_cache = {true, false}, prompt = 64 },
}
)");
  const ScriptOutcome out = run_script(file);
  REQUIRE(out.points.size() == 4);  // 2 models x 1 prompt x 2 kv_cache
  CHECK(out.points[0].scenario.model.name == "tiny-gpt");
  CHECK(out.points[0].scenario.workload.kv_cache);
  CHECK_FALSE(out.points[1].scenario.workload.kv_cache);
  CHECK(out.points[1].values.at("kv_cache") == "false");
  CHECK(out.points[2].scenario.model.name == "tiny-llama");
  for (const auto& p : out.points) CHECK(p.scenario.workload.prompt == 64);
}

TEST_CASE("dsl: sweep keys are checked against the workload") {
  const std::string a = write_script("sweep_bad_key.lua", R"(local x = 1
return scenario {
  model = "tiny-llama", hardware = "L4", workload = decode {},
  sweep = { bach = {1, 2} },
}
)");
  CHECK(starts_with(script_error(a), a + ":2: unknown sweep key 'bach' (did you mean 'batch'?); sweep keys: model, hardware, rate, users, requests, batch,"));
  const std::string b = write_script("sweep_seq.lua", R"(return scenario {
  model = "tiny-llama", hardware = "L4", workload = decode {}, sweep = { seq = {128} } }
)");
  CHECK(contains(script_error(b), "sweep key 'seq' does not apply to a decode workload"));
  const std::string c = write_script("sweep_frac.lua", R"(return scenario {
  model = "tiny-llama", hardware = "L4", workload = decode {}, sweep = { batch = {1, 2.5} } }
)");
  CHECK(contains(script_error(c), "sweep.batch[2] must be a whole number (got 2.5)"));
  // A point that breaks a limit names the point.
  const std::string d = write_script("sweep_limit.lua", R"(return scenario {
  model = "tiny-llama", hardware = "L4", workload = decode { new_tokens = 16 },
  sweep = { prompt = {64, 250} } }
)");
  const std::string msg = script_error(d);
  CHECK(contains(msg, "sweep point prompt=250: prompt + new_tokens = 266 exceeds tiny-llama's max_seq 256"));
}

TEST_CASE("dsl: sweep helpers grid, range and geomspace") {
  const std::string file = write_script("sweep_helpers.lua", R"(
return scenario {
  model = "tiny-llama", hardware = "L4", workload = decode { prompt = 8, new_tokens = 8 },
  sweep = { batch = geomspace(1, 64), new_tokens = range(8, 16, 4) },
}
)");
  const ScriptOutcome out = run_script(file);
  REQUIRE(out.scenario->sweep.size() == 2);
  CHECK(out.scenario->sweep[0].values == std::vector<std::string>{"1", "2", "4", "8", "16", "32", "64"});
  CHECK(out.scenario->sweep[1].values == std::vector<std::string>{"8", "12", "16"});
  CHECK(out.points.size() == 21);

  const std::string checks = write_script("sweep_helpers_values.lua", R"(
local g = grid { prompt = {128, 512}, batch = {1, 8, 32} }
assert(#g == 6, "grid size")
-- keys in alphabetical order, the last one (prompt) fastest
assert(g[1].batch == 1 and g[1].prompt == 128 and g[2].batch == 1 and g[2].prompt == 512)
assert(g[6].batch == 32 and g[6].prompt == 512)
local r = range(1, 10, 3)
assert(#r == 4 and r[4] == 10)
local e = geomspace(1, 1000, 4)
assert(#e == 4 and e[1] == 1 and e[2] == 10 and e[3] == 100 and e[4] == 1000)
assert(#geomspace(4, 100) == 5)  -- 4 8 16 32 64
)");
  CHECK_NOTHROW((void)run_script(checks));
}
