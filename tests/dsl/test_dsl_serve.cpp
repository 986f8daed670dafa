// serve{} in scripts: every arrival kind and length form read into the Scenario's ServeSpec,
// files relative to the script, sweeps over rate, and one-line errors naming the field.
#include <doctest/doctest.h>

#include "core/errors.hpp"
#include "test_dsl_support.hpp"

using namespace perfsim;
using namespace perfsim::test;

namespace {

Scenario scenario_of(const std::string& name, const std::string& workload, const std::string& extra = "") {
  const std::string file = write_script(name, "return scenario { model = \"tiny-llama\", hardware = \"H100\",\n"
                                              "  workload = " + workload + ",\n" + extra + "}\n");
  const ScriptOutcome o = run_script(file);
  REQUIRE(o.scenario);
  return *o.scenario;
}

}  // namespace

TEST_CASE("dsl: serve{} reads traffic, lengths, prefixes and SLOs") {
  const Scenario s = scenario_of("serve_all.lua",
                                 "serve { requests = 50, seed = 9, arrivals = gamma { rate = 4, burstiness = 0.5 },\n"
                                 "  prompt = lengths { dist = \"lognormal\", mean = 100, max = 200 }, output = 16,\n"
                                 "  prefix = { groups = 2, tokens = 32, share = 0.5 }, slo = { ttft = 0.2, tpot = 0.02 } }");
  REQUIRE(s.serve);
  const ServeSpec& v = *s.serve;
  CHECK(v.requests == 50);
  CHECK(v.seed == 9);
  CHECK(v.arrivals.kind == ArrivalKind::gamma);
  CHECK(v.arrivals.rate == 4);
  CHECK(v.arrivals.burstiness == 0.5);
  CHECK(v.prompt.dist == LengthDist::lognormal);
  CHECK(v.prompt.max == 200);
  CHECK(v.output.dist == LengthDist::fixed);
  CHECK(v.output.mean == 16);
  CHECK(v.prefix.groups == 2);
  CHECK(v.slo.tpot == 0.02);
  CHECK(contains(v.where, "serve_all.lua:2"));
  // The decode step explain shows: one sequence at the mean lengths.
  CHECK(s.workload.phase == Phase::decode);
  CHECK(s.workload.prompt == 100);
  CHECK(s.workload.new_tokens == 16);

  CHECK(scenario_of("serve_closed.lua", "serve { arrivals = closed { users = 8, think = 1 } }").serve->arrivals.users == 8);
  CHECK(scenario_of("serve_ramp.lua", "serve { arrivals = ramp { start_rate = 1, rate = 9 } }").serve->arrivals.start_rate == 1);
  write_script("serve_trace.jsonl", "{\"arrival\": 0, \"prompt\": 8, \"output\": 2}\n");
  const Scenario t = scenario_of("serve_trace.lua", "serve { arrivals = trace \"serve_trace.jsonl\" }");
  CHECK(t.serve->arrivals.kind == ArrivalKind::trace);
  CHECK(contains(t.serve->arrivals.file, "/serve_trace.jsonl"));  // relative to the script
}

TEST_CASE("dsl: serve{} knobs in steps and sweeps over rate") {
  const std::string file = write_script("serve_sweep.lua", R"(
return scenario { model = "tiny-llama", hardware = "H100",
  workload = serve { requests = 20, arrivals = poisson { rate = 1 } },
  stacks = { step("c", "bf16", {scheduler = "continuous", max_batch = 8}) },
  sweep = { rate = {0.5, 2} } }
)");
  const ScriptOutcome o = run_script(file);
  REQUIRE(o.points.size() == 2);
  CHECK(o.points[0].scenario.serve->arrivals.rate == 0.5);
  CHECK(o.points[1].scenario.serve->arrivals.rate == 2);
  CHECK(o.points[1].values.at("rate") == "2");
  const StackStep& st = o.points[0].scenario.stacks.at(0);
  bool scheduler = false;
  for (const PassSpec& p : st.passes) scheduler = scheduler || (p.name == "scheduler" && p.text == "continuous");
  CHECK(scheduler);
}

TEST_CASE("dsl: serve{} errors name the field") {
  auto err = [](const std::string& name, const std::string& body) {
    return script_error(write_script(name, body));
  };
  const std::string head = "return scenario { model = \"tiny-llama\", hardware = \"H100\", workload = ";
  CHECK(contains(err("e1.lua", head + "serve { arrivals = poisson { rate = -1 } } }"),
                 "serve.arrivals.rate must be > 0"));
  CHECK(contains(err("e2.lua", head + "serve { arrivals = poisson { rat = 1 } } }"), "unknown field 'rat'"));
  CHECK(contains(err("e3.lua", head + "serve { requests = 5 } }"), "needs arrivals = poisson"));
  CHECK(contains(err("e4.lua", head + "serve { arrivals = 5 } }"), "must be poisson{rate = ...}"));
  CHECK(contains(err("e5.lua", head + "serve { arrivals = poisson { rate = 1 }, prompt = lengths { dist = \"lognorm\" } } }"),
                 "did you mean 'lognormal'"));
  CHECK(contains(err("e6.lua", head + "serve { arrivals = poisson { rate = 1 } }, sweep = { batch = {1, 2} } }"),
                 "does not apply to a serve{} workload"));
  CHECK(contains(err("e7.lua", head + "decode { batch = 1 }, sweep = { rate = {1, 2} } }"),
                 "needs workload = serve{...}"));
  CHECK(contains(err("e8.lua", head + "decode { batch = 1 }, stacks = { step(\"s\", {scheduler = \"static\"}) } }"),
                 "'scheduler' is a serving engine's knob"));
  CHECK(contains(err("e9.lua", head + "serve { arrivals = closed { users = 2 } }, sweep = { rate = {1} } }"),
                 "sweep.rate varies the arrival rate"));
  // tp and pp split an engine; what splits a training step or one sequence does not serve.
  CHECK(contains(err("e10.lua", head + "serve { arrivals = poisson { rate = 1 } }, parallel = { cp = 2 } }"),
                 "parallel: a serving engine does not take cp = 2"));
  CHECK(contains(err("e11.lua", head + "serve { arrivals = poisson { rate = 1 } }, parallel = { dp = 2, zero = 1 } }"),
                 "does not take zero/fsdp"));
}
