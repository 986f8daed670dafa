// Declared options: defaults, --set overrides converted by the default's type, type errors,
// unknown overrides, and options_only (for `perfsim run x.lua --help`).
#include <doctest/doctest.h>

#include "test_dsl_support.hpp"

using namespace perfsim;
using namespace perfsim::test;

namespace {
DslSettings with(std::vector<std::pair<std::string, std::string>> overrides) {
  DslSettings s;
  s.overrides = std::move(overrides);
  return s;
}
}  // namespace

TEST_CASE("dsl: options take their defaults and are listed by name") {
  const ScriptOutcome out = run_script(dsl_fixture("options.lua"));
  REQUIRE(out.options.size() == 4);
  CHECK(out.options[0].name == "batch");
  CHECK(out.options[0].type == "number");
  CHECK(out.options[0].default_value == "1");
  CHECK(out.options[0].description == "sequences decoded together");
  CHECK(out.options[1].name == "graphs");
  CHECK(out.options[1].type == "boolean");
  CHECK(out.options[1].default_value == "true");
  CHECK(out.options[2].name == "layers");
  CHECK(out.options[3].name == "model");
  CHECK(out.options[3].type == "string");
  CHECK(out.options[3].default_value == "tiny-llama");
  REQUIRE(out.scenario.has_value());
  CHECK(out.scenario->model.name == "tiny-llama");
  CHECK(out.scenario->workload.batch == 1);
  CHECK(out.scenario->execute.layers == 1);
  CHECK(out.scenario->stacks.size() == 2);
}

TEST_CASE("dsl: --set overrides are converted by the default's type") {
  const ScriptOutcome out = run_script(
      dsl_fixture("options.lua"),
      with({{"batch", "8"}, {"graphs", "false"}, {"model", "tiny-gpt"}, {"layers", "2"}, {"batch", "16"}}));
  REQUIRE(out.scenario.has_value());
  CHECK(out.scenario->workload.batch == 16);  // the last --set of a name wins
  CHECK(out.scenario->stacks.size() == 1);    // graphs = false drops the step
  CHECK(out.scenario->model.name == "tiny-gpt");
  CHECK(out.scenario->execute.layers == 2);
  // The listing still shows the declared defaults.
  CHECK(out.options[0].default_value == "1");
}

TEST_CASE("dsl: a bad override value names the option and the expected type") {
  const std::string file = dsl_fixture("options.lua");
  const std::string msg = script_error(file, with({{"batch", "eight"}}));
  CHECK(starts_with(msg, file + ":2: option 'batch' expects a number (got 'eight')"));
  CHECK_FALSE(contains(msg, "stack traceback:"));  // one line: --set batch=eight is a value, not a bug
  const std::string b = script_error(file, with({{"graphs", "maybe"}}));
  CHECK(contains(b, "option 'graphs' expects a boolean: true or false (got 'maybe')"));
  // "1e1" is a number; "8x" is not.
  CHECK(run_script(file, with({{"batch", "1e1"}})).scenario->workload.batch == 10);
  CHECK(contains(script_error(file, with({{"batch", "8x"}})), "expects a number (got '8x')"));
  // strtod reads these, but no option means them.
  CHECK(contains(script_error(file, with({{"batch", "nan"}})), "expects a number (got 'nan')"));
  CHECK(contains(script_error(file, with({{"batch", "inf"}})), "expects a number (got 'inf')"));
}

TEST_CASE("dsl: an override naming no declared option is an error with a suggestion") {
  const std::string file = dsl_fixture("options.lua");
  const std::string msg = config_error(file, with({{"bach", "3"}}));
  CHECK(msg == "unknown option 'bach' for " + file +
                   " (did you mean 'batch'?); declared: batch, graphs, layers, model");
  const std::string plain = dsl_fixture("plain.lua");
  CHECK(config_error(plain, with({{"x", "1"}})) ==
        "unknown option 'x' for " + plain + ": the script declares no options");
}

TEST_CASE("dsl: reading an undeclared option is an error at the script's line") {
  const std::string file = write_script("opt_typo.lua", R"(local opt = options { batch = {"b", 1} }
local x = opt.batch
local y = opt.bach
)");
  const std::string msg = script_error(file);
  CHECK(starts_with(msg, file + ":3: unknown option 'bach' (did you mean 'batch'?); declared: batch"));
}

TEST_CASE("dsl: option declarations are checked") {
  const std::string a = write_script("opt_nodefault.lua", "local o = options { batch = {\"b\"} }\n");
  CHECK(contains(script_error(a), a + ":1: option 'batch': the default (second entry) must be a number, string or boolean"));
  const std::string b = write_script("opt_named.lua",
                                     "local o = options { n = {description = \"d\", default = 4} }\n"
                                     "assert(o.n == 4)\n");
  CHECK(run_script(b).options.at(0).default_value == "4");
}

TEST_CASE("dsl: options_only stops right after options{}") {
  DslSettings s;
  s.options_only = true;
  const std::string file = write_script("opt_stop.lua", R"(local opt = options { n = {"count", 2} }
error("the script must stop before this line")
)");
  const ScriptOutcome out = run_script(file, s);
  REQUIRE(out.options.size() == 1);
  CHECK(out.options[0].name == "n");
  CHECK_FALSE(out.scenario.has_value());
  CHECK(out.points.empty());
  // A script without options{} declares none.
  const ScriptOutcome none = run_script(dsl_fixture("full_scenario.lua"), s);
  CHECK(none.options.empty());
  CHECK_FALSE(none.scenario.has_value());
  // Listing options never runs predictions either.
  const std::string p = write_script("opt_predict.lua", R"(
local rows = perfsim.predict { model = "tiny-llama", hardware = "L4", workload = decode {} }
error("predict must not run when only listing options")
)");
  CHECK(run_script(p, s).options.empty());
}
