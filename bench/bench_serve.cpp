// Serving prediction speed: 10,000 requests of Llama-3-8B traffic on an H100 through the engine
// of each scheduler (target ≤ 1 s each on 2 cores), medians of repeats: the traffic drawn, the
// engine loop on the cost model's clock, the metrics. Graph builds for the step prices are
// counted within.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/serve/simulate.hpp"
#include "core/serve/traffic.hpp"
#include "dsl/dsl.hpp"
#include "bench_util.hpp"

using namespace perfsim;
using namespace perfsim::bench;

namespace {



StackStep step(std::string name, std::vector<PassSpec> passes) { return StackStep{std::move(name), std::move(passes), ""}; }

}  // namespace

// perfsim_bench_serve [repeats] [requests]
int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const int64_t count = argc > 2 ? std::max(1, std::atoi(argv[2])) : 10000;
  const Hardware h100 = find_hardware("H100-SXM");
  const ModelConfig model = find_model("llama-3-8b");
  ServeSpec spec;
  spec.requests = count;
  spec.arrivals.rate = 20;
  spec.prompt.dist = LengthDist::lognormal;
  spec.prompt.mean = 512;
  spec.prompt.max = 4096;
  spec.output.dist = LengthDist::lognormal;
  spec.output.mean = 256;
  spec.output.max = 2048;
  spec.prefix.groups = 8;
  spec.prefix.tokens = 256;
  spec.prefix.share = 0.5;
  spec.slo.ttft = 0.5;
  spec.slo.tpot = 0.05;
  const std::vector<StackStep> stack = {
      step("static", {{"bf16"}, {"flash_attention"}, {"scheduler", std::nullopt, "static"}, {"max_batch", 32}}),
      step("dynamic", {{"scheduler", std::nullopt, "dynamic"}, {"max_wait", 0.01}}),
      step("continuous", {{"scheduler", std::nullopt, "continuous"}}),
      step("+paged_kv", {{"paged_kv"}}),
      step("+chunked_prefill", {{"chunked_prefill", 512}}),
      step("+prefix_cache", {{"prefix_cache"}}),
      step("+cuda_graphs", {{"cuda_graphs"}}),
      step("+fp8", {{"fp8"}}),
  };
  fmt::print("serving prediction: {} requests of llama-3-8b on H100-SXM (poisson 20/s, lognormal 512/256); {}\n",
             count, cpu_model());
  fmt::print("{:<18} {:>10} {:>8} {:>8} {:>7}\n", "step", "median", "steps", "builds", "target");
  double worst = 0;
  for (std::size_t i = 0; i < stack.size(); ++i) {
    std::vector<double> times;
    ServePrediction p;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = clock_type::now();
      const std::vector<Request> requests = make_requests(spec, model.max_seq);
      p = predict_serving(model, h100, spec, requests, stack, i);
      times.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    }
    const double m = median(times);
    worst = std::max(worst, m);
    fmt::print("{:<18} {:>8.3f} s {:>8} {:>8} {:>7}\n", stack[i].name, m, p.metrics.steps, p.graph_builds,
               m <= 1.0 ? "≤ 1 s" : "MISSED");
  }
  fmt::print("slowest step: {:.3f} s (target ≤ 1 s)\n", worst);
  return 0;
}
