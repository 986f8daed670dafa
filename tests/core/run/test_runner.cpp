// Runner with a fake backend (one step unsupported, one throwing NotExecutable, the rest
// measured), predict-only runs, scenario validation, and the derived comparisons.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "approx.hpp"
#include "core/errors.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

ModelConfig tiny_model() {
  ModelConfig m;
  m.name = "tiny";
  m.layers = 4;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = 128;
  m.vocab = 256;
  m.max_seq = 256;
  m.activation = Activation::swiglu;
  m.norm = NormKind::rmsnorm;
  m.rope = true;
  return m;
}

Hardware profile(const std::string& name, double bandwidth) {
  Hardware hw;
  hw.name = name;
  hw.peak_flops[static_cast<int>(DType::fp32)] = 1e12;
  hw.memory_bytes = 16e9;
  hw.memory_bandwidth = bandwidth;
  hw.launch_eager = 1e-6;
  return hw;
}

Scenario tiny_scenario() {
  Scenario s;
  s.name = "runner-test";
  s.model = tiny_model();
  s.workload.phase = Phase::decode;
  s.workload.batch = 2;
  s.workload.prompt = 16;
  s.workload.new_tokens = 8;
  s.hardware = {profile("fake-device", 50e9), profile("big-gpu", 3e12)};
  s.execute.layers = 2;
  s.execute.warmup = 0;
  s.execute.repeats = 1;
  return s;
}

// Behaves by the name of the graph's last applied step: "+unsupported" has an op it cannot run,
// "+throws" fails inside run(), anything else is "measured" at 1 us per op.
class FakeBackend : public Backend {
 public:
  double memory_bytes = 8e9;
  int runs = 0;
  int zero_runs = 0;  // runs still to come back with their first op timed at zero
  RunOptions last;    // the options of the last run

  std::string name() const override { return "fake"; }
  DeviceInfo device() const override {
    DeviceInfo d;
    d.backend = "fake";
    d.name = "Fake Device 9000";
    d.memory_bytes = memory_bytes;
    return d;
  }
  std::string unsupported_reason(const Op& op, const Graph& g) const override {
    if (!g.applied.empty() && g.applied.back() == "+unsupported" && op.id == 0)
      return "fake backend has no kernel for " + op.name;
    return {};
  }
  Measurement run(const Graph& g, const RunOptions& o) override {
    if (!g.applied.empty() && g.applied.back() == "+throws")
      throw NotExecutable("fake backend ran out of scratch space");
    ++runs;
    last = o;
    Measurement m;
    m.backend = "fake";
    m.warmup = o.warmup;
    m.repeats = o.repeats;
    for (const Op& op : g.ops) {
      m.ops.push_back({op.id, 1e-6, 1e-6, true});
      m.step_time += 1e-6 * op.count;
    }
    if (zero_runs > 0) {
      --zero_runs;
      m.ops.front().median = 0;
    }
    return m;
  }
};

std::string config_error(const Scenario& s) {
  try {
    validate(s);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("runner: unsupported, throwing and measured steps") {
  Scenario s = tiny_scenario();
  s.stacks = {{"baseline", {}}, {"+unsupported", {}}, {"+throws", {}}, {"+ok", {}}};
  s.execute.min_time = 0.125;
  FakeBackend backend;
  std::vector<std::string> progress;
  RunnerHooks hooks;
  hooks.progress = [&](std::size_t step, std::size_t steps, const std::string& name) {
    progress.push_back(fmt::format("[{}/{}] {}", step + 1, steps, name));
  };
  const RunResult r = run_scenario(s, &backend, &s.hardware[0], hooks);
  CHECK(progress == std::vector<std::string>{"[1/4] baseline", "[2/4] +unsupported",
                                             "[3/4] +throws", "[4/4] +ok"});
  REQUIRE(r.steps.size() == 4);
  CHECK(backend.runs == 2);
  CHECK(r.steps[0].measured.has_value());
  CHECK(r.steps[0].not_executed.empty());
  CHECK_FALSE(r.steps[1].measured.has_value());
  CHECK(r.steps[1].not_executed.rfind("fake backend has no kernel for ", 0) == 0);
  CHECK_FALSE(r.steps[2].measured.has_value());
  CHECK(r.steps[2].not_executed == "fake backend ran out of scratch space");
  CHECK(r.steps[3].measured.has_value());
  CHECK(r.steps[3].step == "+ok");
  CHECK(r.steps[0].measured->repeats == 1);
  CHECK(backend.last.repeats == s.execute.repeats);  // the scenario's execute options reach the backend
  CHECK(backend.last.warmup == s.execute.warmup);
  CHECK(backend.last.min_time == 0.125);

  // The measured device's profile is primary; the other scenario hardware is a what-if.
  for (const StepResult& step : r.steps) {
    CHECK(step.predicted.hardware == "fake-device");
    REQUIRE(step.what_if.size() == 1);
    CHECK(step.what_if[0].hardware == "big-gpu");
    CHECK(step.predicted.ops.size() == step.graph.ops.size());
    CHECK(step.predicted.step_time > step.what_if[0].step_time);  // 60x less bandwidth
  }
  CHECK(r.scenario == "runner-test");
  CHECK(r.model == "tiny");
  CHECK(r.model_params == tiny_model().params());
  CHECK(r.workload == describe(s.workload));
  CHECK(r.backend == "fake");
  CHECK(r.device == "Fake Device 9000");
  CHECK(r.sampling == "executed 2 of 4 transformer layers; per-layer times and memory scaled by 2");
}

TEST_CASE("runner: a step with ops timed at zero is measured again") {
  Scenario s = tiny_scenario();
  FakeBackend backend;
  backend.zero_runs = 1;
  RunResult r = run_scenario(s, &backend, &s.hardware[0]);
  REQUIRE(r.steps.size() == 1);
  REQUIRE(r.steps[0].measured.has_value());
  CHECK(backend.runs == 2);
  CHECK(r.steps[0].measured->attempts == 2);
  CHECK(r.steps[0].measured->ops.front().median == approx(1e-6));  // the second run kept
  CHECK(step_figures(r).front().note == "measured twice: the first run timed some ops at zero");
  // Zero again: still measured twice, never more; a clean step is run once.
  backend.runs = 0;
  backend.zero_runs = 2;
  r = run_scenario(s, &backend, &s.hardware[0]);
  CHECK(backend.runs == 2);
  CHECK(r.steps[0].measured->ops.front().median == 0);
  backend.runs = 0;
  r = run_scenario(s, &backend, &s.hardware[0]);
  CHECK(backend.runs == 1);
  CHECK(r.steps[0].measured->attempts == 1);
  CHECK(step_figures(r).front().note.empty());
}

TEST_CASE("runner: a graph larger than the device is not run") {
  Scenario s = tiny_scenario();
  FakeBackend backend;
  backend.memory_bytes = 1024;
  const RunResult r = run_scenario(s, &backend, &s.hardware[0]);
  REQUIRE(r.steps.size() == 1);  // empty stack: one baseline step
  CHECK(r.steps[0].step == "baseline");
  CHECK_FALSE(r.steps[0].measured.has_value());
  CHECK(r.steps[0].not_executed.rfind("does not fit: needs ", 0) == 0);
  CHECK(r.steps[0].not_executed.find("device has 0.00 GiB") != std::string::npos);
  CHECK(backend.runs == 0);
}

TEST_CASE("runner: predict only") {
  Scenario s = tiny_scenario();
  s.execute.layers = 0;
  const RunResult r = run_scenario(s, nullptr, nullptr);
  REQUIRE(r.steps.size() == 1);
  CHECK(r.backend == "none");
  CHECK(r.device == "fake-device");
  CHECK(r.sampling == "all layers built");
  CHECK(r.steps[0].predicted.hardware == "fake-device");
  REQUIRE(r.steps[0].what_if.size() == 1);
  CHECK(r.steps[0].what_if[0].hardware == "big-gpu");
  CHECK_FALSE(r.steps[0].measured.has_value());
  CHECK(r.steps[0].not_executed == "predicted only (no backend)");
}

TEST_CASE("scenario validation names the field and the fix") {
  Scenario s = tiny_scenario();
  CHECK(config_error(s) == "no error");
  SUBCASE("context beyond max_seq") {
    s.workload.prompt = 250;
    CHECK(config_error(s) ==
          "prompt + new_tokens = 258 exceeds tiny's max_seq 256; lower prompt or new_tokens");
  }
  SUBCASE("training sequence beyond max_seq") {
    s.workload.phase = Phase::train;
    s.workload.seq = 512;
    CHECK(config_error(s) == "seq = 512 exceeds tiny's max_seq 256; lower seq");
  }
  SUBCASE("no hardware") {
    s.hardware.clear();
    CHECK(config_error(s).find("no hardware given") != std::string::npos);
  }
  SUBCASE("execute options") {
    s.execute.repeats = 0;
    CHECK(config_error(s).rfind("execute.repeats must be between 1 and 10000 (got 0)", 0) == 0);
    s.execute.repeats = 1;
    s.execute.min_time = -0.5;
    CHECK(config_error(s) == "execute.min_time must be seconds in [0, 3600] (got -0.5)");
    s.execute.min_time = 0;
    s.execute.warmup = -1;
    CHECK(config_error(s) == "execute.warmup must be between 0 and 10000 (got -1)");
    s.execute.warmup = 0;
    s.execute.layers = 5;
    CHECK(config_error(s) == "execute.layers = 5 exceeds tiny's 4 layers; use 0 for all layers");
  }
  SUBCASE("model and workload checks are included") {
    s.model.heads = 5;
    CHECK(config_error(s) == "model 'tiny': heads (5) must divide hidden (64)");
  }
  SUBCASE("hardware without bandwidth") {
    s.hardware[1].memory_bandwidth = 0;
    CHECK(config_error(s).rfind("hardware 'big-gpu': memory_bandwidth must be > 0", 0) == 0);
  }
}

TEST_CASE("relative error and throughput speedup") {
  CHECK(relative_error(110, 100) == approx(0.10));
  CHECK(relative_error(90, 100) == approx(-0.10));
  CHECK(std::isnan(relative_error(1, 0)));
  // Same work, half the time: 2x. Batching 1 -> 8 with a 2x longer step: 4x throughput.
  CHECK(speedup(2e-3, 1, 1e-3, 1) == approx(2));
  CHECK(speedup(1e-3, 1, 2e-3, 8) == approx(4));
  CHECK(std::isnan(speedup(0, 1, 1e-3, 1)));
}

namespace {

Hardware h100_like(double memory_bytes) {
  Hardware hw;
  hw.name = "test-h100";
  hw.peak_flops[static_cast<int>(DType::bf16)] = 989e12;
  hw.peak_flops[static_cast<int>(DType::fp32)] = 67e12;
  hw.memory_bytes = memory_bytes;
  hw.memory_bandwidth = 3.35e12;
  hw.nvlink = {450e9, 3e-6};
  hw.infiniband = {50e9, 5e-6};
  hw.gpus_per_node = 8;
  hw.sm_count = 132;
  hw.collective_sms = 16;
  return hw;
}

// Llama-3-8B training over 8 GPUs with DDP: 16 bytes of training state a parameter, 128 GB a
// GPU, more than the GPU holds; sharded or split it fits.
Scenario ddp_scenario(double memory_bytes) {
  Scenario s;
  s.name = "ddp-does-not-fit";
  s.model = test_models::llama3_8b();
  s.workload.phase = Phase::train;
  s.workload.batch = 1;
  s.workload.seq = 1024;
  s.workload.grad_accum = 4;
  s.hardware = {h100_like(memory_bytes)};
  s.parallel.dp = 8;
  s.stacks = {StackStep{"bf16", {PassSpec{"bf16", {}}, PassSpec{"flash_attention", {}}}, ""}};
  s.execute.layers = 1;
  return s;
}

}  // namespace

TEST_CASE("runner: a layout that does not fit names layouts of its GPUs that do") {
  const Scenario s = ddp_scenario(80e9);
  const RunResult r = run_scenario(s, nullptr, nullptr);
  REQUIRE(r.steps.size() == 1);
  REQUIRE(r.steps[0].layout.has_value());
  const LayoutPrediction& lp = *r.steps[0].layout;
  CHECK_FALSE(lp.fits);
  CHECK(lp.layout.node_gpus == 8);  // the hardware's nodes
  CHECK(lp.fit_searched);
  REQUIRE_FALSE(lp.layouts_that_fit.empty());
  CHECK(lp.layouts_that_fit.size() <= 3);
  for (std::size_t i = 0; i < lp.layouts_that_fit.size(); ++i) {
    const FittingLayout& f = lp.layouts_that_fit[i];
    CAPTURE(describe(f.layout));
    CHECK(f.layout.gpus() == 8);
    // The step's global batch: 1 sequence × 4 micro-batches × 8 replicas.
    CHECK(f.micro_batch * f.grad_accum * f.layout.dp == 32);
    if (i > 0) {
      CHECK(f.tokens_per_second_per_gpu <= lp.layouts_that_fit[i - 1].tokens_per_second_per_gpu);
      CHECK(describe(f.layout) != describe(lp.layouts_that_fit[i - 1].layout));
    }
    // Priced as the step is, each fits.
    Workload w = s.workload;
    w.batch = f.micro_batch;
    w.grad_accum = f.grad_accum;
    CHECK(predict_layout(build_rank_graphs(s.model, w, s.stacks, 0, f.layout, 1), f.layout, s.hardware[0]).fits);
  }
  // The report puts them beside "does not fit", the JSON under predicted.parallel.
  const std::vector<StepFigures> figs = step_figures(r);
  const std::string first = describe(lp.layouts_that_fit.front().layout);
  CHECK(figs[0].note.rfind("does not fit: needs ", 0) == 0);
  CHECK(figs[0].note.find("; fits: " + first) != std::string::npos);
  CHECK(figs[0].note.find(" tok/s/GPU)") != std::string::npos);
  const auto j = nlohmann::json::parse(format_json({r}));
  const auto& fits = j["results"][0]["steps"][0]["predicted"]["parallel"]["layouts_that_fit"];
  REQUIRE(fits.size() == lp.layouts_that_fit.size());
  CHECK(fits[0]["layout"] == first);
  CHECK(fits[0]["tokens_per_s_per_gpu"].get<double>() ==
        approx(lp.layouts_that_fit.front().tokens_per_second_per_gpu));

  // A layout that fits searches nothing.
  const RunResult roomy = run_scenario(ddp_scenario(1e15), nullptr, nullptr);
  CHECK(roomy.steps[0].layout->fits);
  CHECK_FALSE(roomy.steps[0].layout->fit_searched);
  CHECK(nlohmann::json::parse(format_json({roomy}))["results"][0]["steps"][0]["predicted"]["parallel"]
            ["layouts_that_fit"]
                .is_null());
}

TEST_CASE("runner: when no layout of the GPUs fits, the report says so") {
  const RunResult r = run_scenario(ddp_scenario(4e9), nullptr, nullptr);
  const LayoutPrediction& lp = *r.steps[0].layout;
  CHECK_FALSE(lp.fits);
  CHECK(lp.fit_searched);
  CHECK(lp.layouts_that_fit.empty());
  CHECK(step_figures(r)[0].note.find("; no layout of 8 GPUs fits") != std::string::npos);
  CHECK(nlohmann::json::parse(format_json({r}))["results"][0]["steps"][0]["predicted"]["parallel"]
            ["layouts_that_fit"] == nlohmann::json::array());
}

TEST_CASE("runner: a single-GPU step that does not fit names the fewest GPUs that hold it") {
  // Llama-3-8B, bf16 training: 16 bytes a parameter of model states (128 GB) alone exceed 80 GB.
  Scenario s = ddp_scenario(80e9);
  s.parallel = ParallelSpec{};
  const RunResult r = run_scenario(s, nullptr, nullptr);
  const StepResult& st = r.steps[0];
  CHECK_FALSE(st.layout.has_value());
  CHECK_FALSE(st.predicted.fits);
  CHECK(st.fit_searched);
  REQUIRE(st.fit_gpus >= 2);
  REQUIRE_FALSE(st.layouts_that_fit.empty());
  for (const FittingLayout& f : st.layouts_that_fit) {
    CAPTURE(describe(f.layout));
    CHECK(f.layout.gpus() == st.fit_gpus);
    CHECK(f.micro_batch == 1);  // each GPU keeps the step's micro-batch
    Workload w = s.workload;
    w.batch = f.micro_batch;
    w.grad_accum = f.grad_accum;
    CHECK(predict_layout(build_rank_graphs(s.model, w, s.stacks, 0, f.layout, 1), f.layout, s.hardware[0]).fits);
  }
  const std::vector<StepFigures> figs = step_figures(r);
  CHECK(figs[0].note.find(fmt::format("fits on {} GPUs: {}", st.fit_gpus, describe(st.layouts_that_fit[0].layout))) !=
        std::string::npos);
  const auto j = nlohmann::json::parse(format_json({r}));
  const auto& fits_on = j["results"][0]["steps"][0]["predicted"]["fits_on"];
  CHECK(fits_on["gpus"] == st.fit_gpus);
  CHECK(fits_on["layouts"].size() == st.layouts_that_fit.size());
  // Where even 1,024 GPUs hold nothing (100 MB a GPU: 128 GB of model states need 125 MB a GPU
  // over 1,024), it says so.
  Scenario tiny_gpu = s;
  tiny_gpu.hardware = {h100_like(1e8)};
  const RunResult none = run_scenario(tiny_gpu, nullptr, nullptr);
  CHECK(none.steps[0].fit_searched);
  CHECK(none.steps[0].fit_gpus == 0);
  CHECK(step_figures(none)[0].note.find("no layout of up to 1,024 GPUs fits") != std::string::npos);
}
