// The published-results suite's figures and errors (core/validate/published.hpp), by hand.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "core/errors.hpp"
#include "core/run/published_metrics.hpp"
#include "core/validate/published.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

// One training step of 2 GPUs: 2 s, 8,192 tokens, 1.2e15 model FLOPs, HFU 40% of a 312 TFLOP/s peak.
RunResult training_run() {
  RunResult r;
  r.scenario = "case";
  StepResult s;
  s.step = "published";
  s.predicted.step_time = 2.0;
  s.predicted.model_flops = 1.2e15;
  s.predicted.hfu = 0.4;
  s.predicted.mfu_peak = 312e12;
  LayoutPrediction lp;
  lp.gpus = 2;
  lp.tokens_per_step = 8192;
  s.layout = lp;
  r.steps.push_back(s);
  return r;
}

PublishedFigure figure(const std::string& metric, double value, const std::string& source = "src") {
  PublishedFigure p;
  p.source = source;
  p.citation = "cite";
  p.metric = metric;
  p.value = value;
  return p;
}

}  // namespace

TEST_CASE("published: each training metric of the last step") {
  const RunResult r = training_run();
  CHECK(predicted_figure(r, "step_time") == 2.0);
  CHECK(predicted_figure(r, "tokens_per_s_per_gpu") == approx(8192.0 / 2 / 2));
  CHECK(predicted_figure(r, "model_tflops_per_gpu") == approx(1.2e15 / 2 / 2 / 1e12));  // 300
  CHECK(predicted_figure(r, "hardware_tflops_per_gpu") == approx(0.4 * 312));
  CHECK_THROWS_AS((void)predicted_figure(r, "ttft_mean"), ConfigError);
}

TEST_CASE("published: errors read as the implied time's, negative when perfsim is faster") {
  const RunResult r = training_run();
  // A time: predicted 2 s against 2.5 s published is 20% fast.
  CHECK(published_case(r, figure("step_time", 2.5), "A100", "datasheet").error == approx(-0.2));
  // A rate: 2,048 tokens/s/GPU predicted against 1,024 published is the time halved.
  CHECK(published_case(r, figure("tokens_per_s_per_gpu", 1024), "A100", "datasheet").error == approx(-0.5));
  // 124.8 TFLOP/s predicted against 156 published: 156 / 124.8 − 1 = +25% (slower).
  CHECK(published_case(r, figure("hardware_tflops_per_gpu", 156), "A100", "datasheet").error == approx(0.25));
}

TEST_CASE("published: each source's mean and worst |error|, in order of first appearance") {
  const RunResult r = training_run();
  std::vector<PublishedCase> cases;
  cases.push_back(published_case(r, figure("step_time", 2.5, "b"), "A100", "d"));   // -20%
  cases.push_back(published_case(r, figure("step_time", 1.6, "a"), "A100", "d"));   // +25%
  cases.push_back(published_case(r, figure("step_time", 2.0, "b"), "A100", "d"));   // 0
  const PublishedSummary s = summarize_published(cases);
  REQUIRE(s.sources.size() == 2);
  CHECK(s.sources[0].source == "b");
  CHECK(s.sources[0].cases == 2);
  CHECK(s.sources[0].mean_abs_error == approx(0.1));
  CHECK(s.sources[0].max_abs_error == approx(0.2));
  CHECK(s.sources[1].mean_abs_error == approx(0.25));
  CHECK(s.mean_abs_error == approx(0.45 / 3));
  CHECK(s.max_abs_error == approx(0.25));
}

TEST_CASE("published: the metric table names every metric once") {
  CHECK(is_published_metric("step_time"));
  CHECK_FALSE(is_published_metric("latency"));
  CHECK(published_metric_names().find("output_tokens_per_s") != std::string::npos);
}
