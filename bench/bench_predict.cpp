// Prediction speed: how long perfsim takes to predict one step, and a 10,000-point sweep
// driven from Lua. Targets: < 1 ms per Llama-3-70B step, < 10 s for the sweep.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cost/cost_model.hpp"
#include "core/passes/passes.hpp"
#include "dsl/dsl.hpp"
#include "bench_util.hpp"

using namespace perfsim;
using namespace perfsim::bench;

namespace {



struct Row {
  std::string what;
  double seconds;
  double target;
};

// Median over `repeats` of building the step's graph and predicting it (what `perfsim run
// --backend none` does per stack step), after warm-up.
Row time_prediction(const std::string& what, const ModelConfig& m, const Workload& w,
                    const std::vector<StackStep>& stack, const Hardware& hw) {
  double sink = 0;
  std::vector<double> samples;
  for (int i = 0; i < 220; ++i) {
    auto t0 = clock_type::now();
    Graph g = build_stack_graph(m, w, stack, stack.size() - 1, BuildOptions{2});
    Prediction p = predict(g, hw);
    const double dt = seconds_since(t0);
    sink += p.step_time;
    if (i >= 20) samples.push_back(dt);
  }
  if (sink <= 0) std::fputs("unexpected zero prediction\n", stderr);
  return {what, median(samples), 1e-3};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string source = argc > 1 ? argv[1] : PERFSIM_SOURCE_DIR;
  const Hardware h100 = find_hardware("H100-SXM");
  const ModelConfig llama70 = find_model("llama-3-70b");
  std::vector<Row> rows;

  Workload decode;
  decode.phase = Phase::decode;
  decode.batch = 8;
  decode.prompt = 2048;
  decode.new_tokens = 256;
  const std::vector<StackStep> decode_stack = {
      {"baseline", {{"bf16", {}}}}, {"+flash_attention", {{"flash_attention", {}}}},
      {"+cuda_graphs", {{"cuda_graphs", {}}}}, {"+fp8", {{"fp8", {}}}}};
  rows.push_back(time_prediction("predict llama-3-70b decode step (H100)", llama70, decode,
                                 decode_stack, h100));

  Workload train;
  train.phase = Phase::train;
  train.batch = 1;
  train.seq = 4096;
  const std::vector<StackStep> train_stack = {
      {"fp32", {}}, {"+bf16", {{"bf16", {}}}}, {"+fused_optimizer", {{"fused_optimizer", {}}}},
      {"+fusion", {{"fusion", {}}}}, {"+recompute", {{"recompute", {}}}}};
  rows.push_back(time_prediction("predict llama-3-70b training step (H100)", llama70, train,
                                 train_stack, h100));

  // The sweep script prints its own summary; here we time the whole script.
  const std::string sweep = source + "/examples/sweep_10k.lua";
  auto t0 = clock_type::now();
  (void)run_script(sweep);
  rows.push_back({"10,000-point sweep from Lua (examples/sweep_10k.lua)", seconds_since(t0), 10.0});

  fmt::print("\n{:<58} {:>12} {:>10} {:>6}\n", "benchmark", "measured", "target", "ok");
  bool all_ok = true;
  for (const auto& r : rows) {
    const bool ok = r.seconds < r.target;
    all_ok = all_ok && ok;
    auto show = [](double s) {
      return s < 1e-3 ? fmt::format("{:.1f} us", s * 1e6)
                      : s < 1 ? fmt::format("{:.2f} ms", s * 1e3) : fmt::format("{:.2f} s", s);
    };
    fmt::print("{:<58} {:>12} {:>10} {:>6}\n", r.what, show(r.seconds), show(r.target),
               ok ? "yes" : "NO");
  }
  return all_ok ? 0 : 1;
}
