// Several validation runs compared (core/validate/runs.hpp) and their report: ops over the
// threshold in every run against some runs, matched by scenario, step and op name.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

#include "approx.hpp"
#include "core/report/validation.hpp"
#include "core/validate/runs.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

OpError op(const char* step, const char* name, double error, double measured) {
  OpError e;
  e.scenario = "decode";
  e.step = step;
  e.op = name;
  e.kind = OpKind::rope;
  e.measured = measured;
  e.predicted = measured * (1 + error);
  e.error = error;
  return e;
}

ValidationSummary run(std::vector<OpError> ops) {
  ValidationSummary s;
  std::vector<double> errors;
  for (const OpError& e : ops) errors.push_back(e.error);
  s.all_ops = abs_error_stats(errors);
  s.ops = std::move(ops);
  return s;
}

// Three runs of four ops: "biased" over 15% in all three, "noisy" in one, "good" in none;
// "late" is missing from the second run, so it is not compared.
std::vector<ValidationSummary> three_runs() {
  return {run({op("+g", "biased", 0.30, 2e-6), op("+g", "noisy", 0.20, 1e-6), op("+g", "good", 0.01, 5e-6),
               op("+g", "late", 0.5, 1e-6)}),
          run({op("+g", "good", -0.02, 5e-6), op("+g", "noisy", 0.05, 1.5e-6), op("+g", "biased", 0.20, 2e-6)}),
          run({op("+g", "biased", 0.40, 2e-6), op("+g", "noisy", -0.10, 1e-6), op("+g", "good", 0.0, 5e-6),
               op("+g", "late", 0.5, 1e-6)})};
}

}  // namespace

TEST_CASE("compare_runs: biases in every run, noise in some, ops matched by name") {
  const RunsComparison c = compare_runs(three_runs(), 0.15);
  CHECK(c.compared == 3);  // "late" is not in the second run
  CHECK(c.over == std::vector<std::size_t>{2, 1, 1});
  REQUIRE(c.every_run.size() == 1);
  CHECK(c.every_run[0].op == "biased");
  CHECK(c.every_run[0].errors == std::vector<double>{0.30, 0.20, 0.40});  // run order, not file order
  CHECK(c.every_run[0].mean() == approx(0.30));
  CHECK(c.some_runs == 1);  // "noisy"
  // Spread of the measured times: biased 0, good 0, noisy (1.5 − 1) / 1 = 0.5.
  CHECK(c.measured_spread.count == 3);
  CHECK(c.measured_spread.median == approx(0.0));
  CHECK(c.measured_spread.max == approx(0.5));

  // A lower threshold counts "noisy"'s 20% run too, and "biased" stays first (largest |mean|).
  const RunsComparison low = compare_runs(three_runs(), 0.04);
  REQUIRE(low.every_run.size() == 2);
  CHECK(low.every_run[0].op == "biased");
  CHECK(low.every_run[1].op == "noisy");
  CHECK(low.every_run[1].mean() == approx((0.20 + 0.05 - 0.10) / 3));

  CHECK_THROWS_AS((void)compare_runs({three_runs()[0]}, 0.15), std::invalid_argument);
  CHECK_THROWS_AS((void)compare_runs(three_runs(), 0), std::invalid_argument);
}

TEST_CASE("runs comparison report: each run, then the ops over the threshold in every run") {
  const std::vector<ValidationSummary> runs = three_runs();
  const RunsComparison c = compare_runs(runs, 0.15);
  RunsContext ctx;
  ctx.base.suite = "suite";
  ctx.base.scenarios = {"suite/decode.lua"};
  ctx.base.profile = "h100-local";
  ctx.files = {"a.json", "b.json", "c.json"};
  ctx.devices = {"GPU A", "GPU A", "GPU B"};

  const std::string text = format_runs_comparison(runs, c, ctx, ReportFormat::table);
  CHECK(text.find("3 saved reports, priced again (nothing executed)") != std::string::npos);
  CHECK(text.find("Each run |error|") != std::string::npos);
  CHECK(text.find("b.json") != std::string::npos);
  CHECK(text.find("2 of 3") != std::string::npos);  // run 1: biased and noisy over 15%
  CHECK(text.find("Ops over 15.0% in every run: 1 of 3") != std::string::npos);
  CHECK(text.find("decode/+g/biased") != std::string::npos);
  CHECK(text.find("+30.0%") != std::string::npos);
  CHECK(text.find("1 more op over 15.0% in some runs but not all") != std::string::npos);

  const std::string md = format_runs_comparison(runs, c, ctx, ReportFormat::markdown);
  CHECK(md.find("### Ops over 15.0% in every run: 1 of 3") != std::string::npos);

  const auto j = nlohmann::json::parse(format_runs_comparison(runs, c, ctx, ReportFormat::json));
  CHECK(j["validate"]["measurements"].size() == 3);
  CHECK(j["validate"]["op_error"].get<double>() == approx(0.15));
  CHECK(j["runs"][2]["device"] == "GPU B");
  CHECK(j["runs"][0]["ops_over"] == 2);
  CHECK(j["comparison"]["compared_ops"] == 3);
  CHECK(j["comparison"]["over_in_some_runs"] == 1);
  REQUIRE(j["comparison"]["over_in_every_run"].size() == 1);
  CHECK(j["comparison"]["over_in_every_run"][0]["op"] == "biased");
  CHECK(j["comparison"]["over_in_every_run"][0]["errors"][1].get<double>() == approx(0.20));
  CHECK(j["comparison"]["over_in_every_run"][0]["mean_error"].get<double>() == approx(0.30));

  CHECK_THROWS_AS((void)format_runs_comparison(runs, c, ctx, ReportFormat::csv), std::invalid_argument);

  // Runs timed the same way (here: not said) carry no warning; runs timed differently do.
  CHECK(text.find("timed their ops differently") == std::string::npos);
  std::vector<ValidationSummary> mixed = runs;
  for (std::size_t r = 0; r < mixed.size(); ++r) {
    StepValidation v;
    v.op_timing = r == 2 ? "CUPTI records" : "event nodes";
    mixed[r].steps.push_back(v);
  }
  CHECK(format_runs_comparison(mixed, c, ctx, ReportFormat::table)
            .find("the runs timed their ops differently (run 1: event nodes; run 2: event nodes; run 3: CUPTI "
                  "records)") != std::string::npos);
  // Against a profile that says how it was timed: the first run that differs is named.
  RunsContext fitted = ctx;
  fitted.base.calibrated = true;
  fitted.base.measured_on.op_timing = "event nodes";
  CHECK(format_runs_comparison(mixed, c, fitted, ReportFormat::table)
            .find("run 3: the profile's replayed ops were timed by event nodes, these by CUPTI records") !=
        std::string::npos);

  // A report of another suite matches nothing: the report says which run.
  std::vector<ValidationSummary> other = runs;
  other[1] = ValidationSummary{};
  const std::string none = format_runs_comparison(other, compare_runs(other, 0.15), ctx, ReportFormat::table);
  CHECK(none.find("Ops over 15.0% in every run: 0 of 0") != std::string::npos);
  CHECK(none.find("run 2: b.json holds no measured op of this suite") != std::string::npos);
}
