#include "core/validate/published.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/run/published_metrics.hpp"

namespace perfsim {

namespace {

double training_figure(const StepResult& s, const std::string& metric) {
  const Prediction& p = s.predicted;
  if (p.step_time <= 0) throw ConfigError(fmt::format("step '{}' predicted no time", s.step));
  const int gpus = s.layout ? std::max(1, s.layout->gpus) : 1;
  const double tokens = step_tokens(s);
  if (metric == "step_time") return p.step_time;
  if (metric == "tokens_per_s_per_gpu") return tokens / p.step_time / gpus;
  if (metric == "model_tflops_per_gpu") return p.model_flops / p.step_time / gpus / 1e12;
  // HFU is the model FLOP/s with the recomputed products counted, over the same peak.
  if (metric == "hardware_tflops_per_gpu") return p.hfu * p.mfu_peak / 1e12;
  throw ConfigError(fmt::format("published.metric '{}' is a serving figure; this scenario is not serve{{}}", metric));
}

double serving_figure(const ServeStepResult& s, const std::string& metric) {
  const ServeMetrics& m = s.predicted.metrics;
  if (metric == "output_tokens_per_s") return m.output_throughput;
  if (metric == "ttft_mean") return m.ttft.mean;
  if (metric == "tpot_mean") return m.tpot.mean;
  throw ConfigError(fmt::format("published.metric '{}' is not a serving figure; use output_tokens_per_s, "
                                "ttft_mean or tpot_mean",
                                metric));
}

}  // namespace

double predicted_figure(const RunResult& r, const std::string& metric) {
  double v = 0;
  if (!r.serve.empty()) v = serving_figure(r.serve.back(), metric);
  else if (!r.steps.empty()) v = training_figure(r.steps.back(), metric);
  else throw ConfigError("the scenario predicted no step");
  if (!std::isfinite(v) || v <= 0)
    throw ConfigError(fmt::format("the prediction has no {} (got {})", metric, v));
  return v;
}

PublishedCase published_case(const RunResult& r, const PublishedFigure& published, const std::string& hardware,
                             const std::string& profile) {
  const PublishedMetric* metric = find_published_metric(published.metric);
  if (metric == nullptr) throw ConfigError(fmt::format("unknown published metric '{}'", published.metric));
  PublishedCase c;
  c.file = r.file;
  c.scenario = r.scenario;
  c.step = !r.serve.empty() ? r.serve.back().step : r.steps.empty() ? std::string() : r.steps.back().step;
  c.hardware = hardware;
  c.profile = profile;
  c.published = published;
  c.predicted = predicted_figure(r, published.metric);
  c.error = metric->rate ? published.value / c.predicted - 1 : c.predicted / published.value - 1;
  return c;
}

PublishedSummary summarize_published(std::vector<PublishedCase> cases) {
  PublishedSummary s;
  s.cases = std::move(cases);
  double total = 0;
  for (const PublishedCase& c : s.cases) {
    const double e = std::abs(c.error);
    total += e;
    s.max_abs_error = std::max(s.max_abs_error, e);
    auto it = std::find_if(s.sources.begin(), s.sources.end(),
                           [&](const PublishedSource& src) { return src.source == c.published.source; });
    if (it == s.sources.end()) {
      s.sources.push_back({c.published.source, c.published.citation, c.published.url, 0, 0, 0, {}});
      it = s.sources.end() - 1;
    }
    it->mean_abs_error += e;  // a sum until divided below
    if (it->cases == 0 || e > it->max_abs_error) {
      it->max_abs_error = e;
      it->worst = c.scenario;
    }
    ++it->cases;
  }
  for (PublishedSource& src : s.sources) src.mean_abs_error /= std::max(1, src.cases);
  if (!s.cases.empty()) s.mean_abs_error = total / static_cast<double>(s.cases.size());
  return s;
}

}  // namespace perfsim
