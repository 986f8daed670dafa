// Report printers on a hand-filled RunResult: units, derived figures (errors, speedups,
// tokens/s), and the table / markdown / JSON / CSV / explain renderings.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

#include "approx.hpp"
#include "core/report/report.hpp"
#include "core/report/text_table.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

// A two-op graph (gemm, rmsnorm) for a decode step of `batch` sequences.
Graph tiny_graph(int64_t batch) {
  Graph g;
  g.model = "tiny";
  g.workload.phase = Phase::decode;
  g.workload.batch = batch;
  g.layers_total = 2;
  g.layers_built = 1;
  const int x = g.add_tensor(Tensor{-1, "x", {batch, 64}, DType::bf16, TensorRole::activation, 1});
  const int w = g.add_tensor(Tensor{-1, "w", {64, 64}, DType::bf16, TensorRole::weight, 2});
  const int y = g.add_tensor(Tensor{-1, "y", {batch, 64}, DType::bf16, TensorRole::activation, 1});
  const int gamma = g.add_tensor(Tensor{-1, "gamma", {64}, DType::bf16, TensorRole::weight, 2});
  const int z = g.add_tensor(Tensor{-1, "z", {batch, 64}, DType::bf16, TensorRole::activation, 1});
  Op mm;
  mm.name = "layer0.q_proj";
  mm.kind = OpKind::gemm;
  mm.dtype = DType::bf16;
  mm.inputs = {x, w};
  mm.outputs = {y};
  mm.attrs.m = batch, mm.attrs.n = 64, mm.attrs.k = 64;
  mm.count = 2;
  g.add_op(mm);
  Op norm;
  norm.name = "layer0.norm";
  norm.kind = OpKind::rmsnorm;
  norm.dtype = DType::bf16;
  norm.inputs = {y, gamma};
  norm.outputs = {z};
  norm.count = 2;
  g.add_op(norm);
  return g;
}

Prediction prediction(const std::string& hw, double step_time, double exec_peak, double model_peak) {
  Prediction p;
  p.hardware = hw;
  p.profile = "datasheet, uncalibrated";
  p.step_time = step_time;
  p.memory_executed.peak = exec_peak;
  p.memory.peak = model_peak;
  p.memory.peak_at = "layer0.norm";
  p.time_by_class = {{OpClass::gemm, 0.75 * step_time}, {OpClass::norm, 0.25 * step_time}};
  // Two ops × count 2: gemm 3/8 of the step each, norm 1/8 each.
  OpCost gemm{0, 524288, 24576, 524288.0 / 24576, true, 0, 0, 0, 0.375 * step_time, true};
  OpCost norm{1, 640, 384, 640.0 / 384, false, 0, 0, 0, 0.125 * step_time, true};
  p.ops = {gemm, norm};
  p.mfu = 0.25;
  return p;
}

Measurement measurement(double step_time, double peak) {
  Measurement m;
  m.backend = "cpu";
  m.device = "Test CPU (2 threads)";
  m.step_time = step_time;
  m.peak_bytes = peak;
  m.time_by_class = {{OpClass::gemm, 0.8 * step_time}, {OpClass::norm, 0.2 * step_time}};
  m.ops = {OpMeasurement{0, 0.4 * step_time, 0.35 * step_time, true},
           OpMeasurement{1, 0.1 * step_time, 0.09 * step_time, true}};
  m.repeats = 3;
  return m;
}

// Three steps on the cpu backend: measured baseline, an fp8 step the cpu cannot run, and a
// batching step (batch 4) that doubles throughput both predicted and measured.
RunResult hand_result(const std::map<std::string, std::string>& sweep = {}) {
  RunResult r;
  r.scenario = "hand";
  r.description = "hand-filled result";
  r.file = "tests/hand.lua";
  r.model = "tiny";
  r.model_params = 8030000000;
  r.workload = "decode batch=1, hand";
  r.backend = "cpu";
  r.device = "Test CPU (2 threads)";
  r.sampling = "executed 1 of 2 transformer layers";
  r.sweep_point = sweep;

  StepResult s0;
  s0.step = "baseline";
  s0.graph = tiny_graph(1);
  s0.predicted = prediction("host-cpu", 2e-3, 1 * gib, 16 * gib);
  s0.measured = measurement(2.5e-3, 1.25 * gib);
  s0.what_if = {prediction("A100-80GB", 1e-3, 1 * gib, 16 * gib)};

  StepResult s1;
  s1.step = "+fp8";
  s1.graph = tiny_graph(1);
  s1.predicted = prediction("host-cpu", 1e-3, 0.5 * gib, 8 * gib);
  s1.not_executed = "cpu backend has no fp8 GEMM";
  Prediction a100_fp8 = prediction("A100-80GB", 0.5e-3, 0.5 * gib, 8 * gib);
  a100_fp8.unsupported = {"fp8"};
  a100_fp8.ops[0].supported = false;
  a100_fp8.ops[0].priced_as = DType::bf16;
  s1.what_if = {a100_fp8};

  StepResult s2;
  s2.step = "+batching";
  s2.graph = tiny_graph(4);
  s2.predicted = prediction("host-cpu", 4e-3, 2 * gib, 100 * gib);
  s2.predicted.fits = false;
  s2.measured = measurement(5e-3, 2 * gib);
  Prediction a100_b = prediction("A100-80GB", 2e-3, 2 * gib, 100 * gib);
  a100_b.fits = false;
  s2.what_if = {a100_b};

  r.steps = {s0, s1, s2};
  return r;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("report units") {
  CHECK(format_duration(1.5e-6) == "1.50 µs");
  CHECK(format_duration(2.5e-3) == "2.50 ms");
  CHECK(format_duration(0.1234) == "123 ms");
  CHECK(format_duration(12.34) == "12.3 s");
  CHECK(format_duration(0) == "0 s");
  CHECK(format_bytes(100) == "100 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(1.5 * gib) == "1.50 GiB");
  CHECK(format_signed_percent(-0.2) == "-20.0%");
  CHECK(format_signed_percent(0.125) == "+12.5%");
  CHECK(format_signed_percent(-1e-6) == "0.0%");
  CHECK(format_speedup(2.0) == "2.00×");
  CHECK(format_rate(1234.6) == "1,235");
  CHECK(format_rate(12345678) == "12,345,678");
  CHECK(format_rate(42.25) == "42.2");
  CHECK(format_duration(std::nan("")) == "—");
}

TEST_CASE("report: model TFLOP/s per GPU and MFU, GPT-3 175B on 1024 A100s (Narayanan et al. 2021, §5.1)") {
  // The paper's 175B run (B = 1536, s = 2048, l = 96, h = 12288, V = 51200) sustains 140
  // teraFLOP/s per GPU counted with eq. 3's full-recompute form, F96 = 4.5110e18 FLOPs an
  // iteration: 4.5110e18 / (1024 · 140e12) = 31.466 s. Its model FLOPs leave the recomputed
  // forward out, F72 = 3.3862e18: 105.1 TFLOP/s per GPU, 33.7% of the A100's 312 TFLOP/s (bf16).
  const double f96 = 4510970753323106304.0, f72 = 3.386196746387325e18;
  const double step = f96 / (1024 * 140e12);
  RunResult r = hand_result();
  r.steps.resize(1);
  StepResult& s = r.steps[0];
  s.predicted.model_flops = f72;  // every GPU's, as a layout's prediction carries it
  s.predicted.mfu_peak = 312e12;
  s.predicted.step_time = step;
  s.predicted.mfu = f72 / 1024 / step / 312e12;
  LayoutPrediction lp;
  lp.layout.tp = 8, lp.layout.pp = 8, lp.layout.dp = 16;
  lp.gpus = 1024;
  lp.step_time = step;
  s.layout = lp;
  s.measured->step_time = 2 * step;  // a run half as fast as predicted: half the utilisation
  const StepFigures f = step_figures(r).at(0);
  CHECK(f.predicted_model_flops_per_gpu == approx(105.092e12).epsilon(1e-5));
  CHECK(f.predicted_mfu == approx(0.336834).epsilon(1e-5));
  CHECK(*f.measured_model_flops_per_gpu == approx(52.546e12).epsilon(1e-5));
  CHECK(*f.measured_mfu == approx(0.168417).epsilon(1e-5));
  const std::string t = format_table({r});
  CHECK(contains(t, "pred MFU"));
  CHECK(contains(t, "33.7% (105 TFLOP/s)"));
  CHECK(contains(t, "16.8% (52.5 TFLOP/s)"));
  const nlohmann::json j = nlohmann::json::parse(format_json({r}));
  const auto& js = j["results"][0]["steps"][0];
  CHECK(js["predicted"]["model_flops"].get<double>() == approx(f72));
  CHECK(js["predicted"]["model_flops_s_per_gpu"].get<double>() == approx(105.092e12).epsilon(1e-5));
  CHECK(js["predicted"]["mfu_peak_flops_s"].get<double>() == 312e12);
  CHECK(js["measured"]["mfu"].get<double>() == approx(0.168417).epsilon(1e-5));
  const std::string csv = format_csv({r});
  CHECK(contains(csv, "predicted_mfu,measured_mfu,predicted_model_flops_s_per_gpu,measured_model_flops_s_per_gpu"));
  // Without a measurement or a peak, nothing is invented.
  r.steps[0].measured.reset();
  CHECK_FALSE(step_figures(r).at(0).measured_mfu.has_value());
  CHECK(format_flops_rate(1.29e14) == "129 TFLOP/s");
  CHECK(format_flops_rate(2.5e9) == "2.50 GFLOP/s");
  CHECK(format_flops_rate(0) == "0.00 FLOP/s");
}

TEST_CASE("report format selection") {
  CHECK(parse_report_format("md") == ReportFormat::markdown);
  CHECK(parse_report_format("JSON") == ReportFormat::json);
  CHECK_FALSE(parse_report_format("xml").has_value());
  CHECK(report_format_for_path("out/run.csv") == ReportFormat::csv);
  CHECK(report_format_for_path("notes.md") == ReportFormat::markdown);
  CHECK_FALSE(report_format_for_path("dir.v2/report").has_value());
}

TEST_CASE("report text table aligns by display width") {
  TextTable t;
  t.add_column("name", Align::left);
  t.add_column("time");
  t.add_row({"a", "1.50 µs"});
  t.add_row({"longer", "12.0 ms"});
  const std::string text = t.to_text();
  std::istringstream in(text);
  std::string line;
  std::vector<std::size_t> widths;
  while (std::getline(in, line)) widths.push_back(display_width(line));
  REQUIRE(widths.size() == 4);  // header, rule, two rows
  for (std::size_t w : widths) CHECK(w == widths.front());
  CHECK(display_width("µs—") == 3);
  CHECK(t.to_markdown() == "| name | time |\n| :--- | ---: |\n| a | 1.50 µs |\n| longer | 12.0 ms |\n");
}

TEST_CASE("report step figures: errors, speedups, throughput") {
  const auto figs = step_figures(hand_result());
  REQUIRE(figs.size() == 3);
  // baseline: predicted 2 ms vs measured 2.5 ms -> -20%; 1 GiB vs 1.25 GiB -> -20%.
  REQUIRE(figs[0].time_error.has_value());
  CHECK(*figs[0].time_error == approx(-0.2));
  CHECK(*figs[0].memory_error == approx(-0.2));
  CHECK(figs[0].predicted_tokens_per_s == approx(500));
  CHECK(*figs[0].measured_tokens_per_s == approx(400));
  CHECK(*figs[0].measured_speedup == approx(1.0));
  // +fp8: predicted twice as fast; not measured, so no measured figures are invented.
  CHECK(figs[1].predicted_speedup == approx(2.0));
  CHECK_FALSE(figs[1].measured_time.has_value());
  CHECK_FALSE(figs[1].measured_speedup.has_value());
  CHECK_FALSE(figs[1].time_error.has_value());
  CHECK(figs[1].note == "not executed: cpu backend has no fp8 GEMM");
  // +batching: 4 tokens in 4 ms = 1000 tok/s vs 500 -> 2×; measured 800 vs 400 -> 2×.
  CHECK(figs[2].tokens_per_step == 4);
  CHECK(figs[2].predicted_speedup == approx(2.0));
  CHECK(*figs[2].measured_speedup == approx(2.0));
  CHECK(*figs[2].time_error == approx(-0.2));
  CHECK_FALSE(figs[2].fits);

  const auto wi = what_if_figures(hand_result());
  REQUIRE(wi.size() == 3);
  CHECK(wi[1].speedup == approx(2.0));
  CHECK(wi[1].note == "A100-80GB has no fp8: priced at bf16");
  CHECK_FALSE(wi[2].fits);
}

TEST_CASE("report table shows measured and not-executed rows") {
  const std::string t = format_table({hand_result()});
  CHECK(contains(t, "tiny (8.03 B params)"));
  CHECK(contains(t, "cpu — Test CPU (2 threads)"));
  CHECK(contains(t, "host-cpu (datasheet, uncalibrated)"));
  CHECK(contains(t, "meas time"));
  CHECK(contains(t, "-20.0%"));
  CHECK(contains(t, "not executed: cpu backend has no fp8 GEMM"));
  CHECK(contains(t, "does not fit"));
  CHECK(contains(t, "1.50 ms / 2.00 ms"));  // gemm class of the baseline, predicted / measured
  CHECK(contains(t, "What-if on other hardware"));
  CHECK(contains(t, "A100-80GB has no fp8: priced at bf16"));
  CHECK(contains(t, "timing    medians of 3 timed runs per step"));
  RunResult timed = hand_result();  // execute.min_time: the steps' counts differ
  timed.steps[2].measured->repeats = 140;
  CHECK(contains(format_table({timed}), "timing    medians of 3-140 timed runs per step"));
  // A GPU backend says how the ops' device times were taken, each method once.
  timed.steps[0].measured->op_timing = "CUPTI records";
  timed.steps[2].measured->op_timing = "CUPTI records";
  CHECK(contains(format_table({timed}), "3-140 timed runs per step; ops' device times from CUPTI records\n"));
  timed.steps[2].measured->op_timing = "events";
  CHECK(contains(format_table({timed}), "ops' device times from CUPTI records and events\n"));

  RunResult predicted_only = hand_result();
  predicted_only.backend = "none";
  for (auto& s : predicted_only.steps) s.measured.reset();
  const std::string p = format_table({predicted_only});
  CHECK(contains(p, "none (prediction only)"));
  CHECK_FALSE(contains(p, "meas time"));
  CHECK_FALSE(contains(p, "not executed"));
  CHECK_FALSE(contains(p, "timing"));
}

TEST_CASE("report markdown renders the same sections") {
  const std::string md = format_markdown({hand_result()});
  CHECK(contains(md, "## hand"));
  CHECK(contains(md, "- **model**: tiny (8.03 B params)"));
  CHECK(contains(md, "### Peak memory"));
  CHECK(contains(md, "| step | pred time |"));
}

TEST_CASE("report json holds steps, ops and what-ifs") {
  const auto doc = nlohmann::json::parse(format_json({hand_result({{"batch", "1"}})}));
  const auto& r = doc.at("results").at(0);
  CHECK(r.at("sweep").at("batch") == "1");
  CHECK(r.at("model_params") == 8030000000LL);
  const auto& steps = r.at("steps");
  REQUIRE(steps.size() == 3);
  CHECK(steps[0].at("time_error").get<double>() == approx(-0.2));
  CHECK(steps[0].at("measured").at("step_time_s").get<double>() == approx(2.5e-3));
  CHECK(steps[1].at("measured").is_null());
  CHECK(steps[1].at("not_executed") == "cpu backend has no fp8 GEMM");
  CHECK(steps[2].at("predicted").at("speedup").get<double>() == approx(2.0));
  REQUIRE(steps[0].at("ops").size() == 2);
  CHECK(steps[0].at("ops")[0].at("class") == "gemm");
  CHECK(steps[0].at("ops")[0].at("bound") == "compute");
  CHECK(steps[0].at("ops")[1].at("measured_median_s").get<double>() == approx(0.25e-3));
  CHECK(r.at("what_if").size() == 3);
  CHECK(r.at("what_if")[1].at("note") == "A100-80GB has no fp8: priced at bf16");
  CHECK(steps[0].at("predicted").at("profile") == "datasheet, uncalibrated");
}

TEST_CASE("report csv: one row per sweep point and step") {
  const std::string csv = format_csv({hand_result({{"batch", "1"}}), hand_result({{"batch", "2"}})});
  std::istringstream in(csv);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() == 1 + 2 * 3);
  CHECK(lines[0].rfind("batch,scenario,step,model,workload,", 0) == 0);
  CHECK(contains(lines[0], "A100-80GB_step_s"));
  // The workload holds a comma, so it is quoted; an unmeasured step leaves measured cells empty.
  CHECK(lines[1].rfind("1,hand,baseline,tiny,\"decode batch=1, hand\",cpu,", 0) == 0);
  CHECK(contains(lines[1], ",0.002,0.0025,-0.2,1073741824,1342177280,-0.2,"));
  CHECK(lines[5].rfind("2,hand,+fp8,", 0) == 0);
  CHECK(contains(lines[5], ",0.001,,,"));
}

// Splits one CSV line without quoted commas.
std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

TEST_CASE("report csv: what-if columns hold every figure the table shows") {
  RunResult r = hand_result({{"hardware", "H100-SXM"}, {"model", "tiny"}});
  r.workload = "decode batch=1";  // no quoted comma, so the cells split on ','
  r.steps[2].step = r.steps[1].step;  // two steps of one name: matched by position
  const std::string csv = format_csv({r});
  std::istringstream in(csv);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() == 4);
  const auto header = csv_cells(lines[0]);
  // Sweep keys that name another column are prefixed, so no column name repeats.
  CHECK(lines[0].rfind("sweep_hardware,sweep_model,scenario,step,model,", 0) == 0);
  for (std::size_t i = 0; i < header.size(); ++i)
    for (std::size_t j = i + 1; j < header.size(); ++j) CHECK(header[i] != header[j]);
  auto cell = [&](std::size_t row, const std::string& column) {
    const auto cells = csv_cells(lines[row]);
    REQUIRE(cells.size() == header.size());
    const auto it = std::find(header.begin(), header.end(), column);
    REQUIRE(it != header.end());
    return cells[static_cast<std::size_t>(it - header.begin())];
  };
  CHECK(cell(1, "layers_built") == "1");
  CHECK(cell(1, "layers_total") == "2");
  // A100 what-ifs: step times 1, 0.5 and 2 ms; tokens 1, 1, 4: speedups 1, 2 and 2.
  CHECK(cell(1, "A100-80GB_step_s") == "0.001");
  CHECK(cell(2, "A100-80GB_speedup") == "2");
  CHECK(cell(3, "A100-80GB_step_s") == "0.002");
  CHECK(cell(3, "A100-80GB_speedup") == "2");
  CHECK(cell(1, "A100-80GB_mfu") == "0.25");
  CHECK(cell(1, "A100-80GB_peak_model_bytes") == "17179869184");
  CHECK(cell(3, "A100-80GB_fits") == "false");
  CHECK(cell(2, "A100-80GB_note") == "A100-80GB has no fp8: priced at bf16");
  CHECK(cell(1, "A100-80GB_note").empty());
}

TEST_CASE("report explain lists ops with their bound and share of the step") {
  const RunResult r = hand_result();
  const StepResult& s = r.steps[0];
  ExplainInput in;
  in.scenario = "hand";
  in.step = s.step;
  in.graph = &s.graph;
  in.prediction = &s.predicted;
  const std::string e = format_explain(in);
  CHECK(contains(e, "hand, step baseline"));
  CHECK(contains(e, "1 of 2 transformer layers built"));
  CHECK(contains(e, "layer0.q_proj"));
  CHECK(contains(e, "1×64×64"));       // gemm shape m×n×k
  CHECK(contains(e, "compute"));
  // The gemm takes 3/8 of the 2 ms step (750 µs) and runs twice (count 2): 1.5 ms, 75%.
  CHECK(contains(e, "750.00"));
  CHECK(contains(e, "1500.0"));
  CHECK(contains(e, "75.0"));
  CHECK(contains(e, "25.0"));          // the norm: 1/8 × 2
}

namespace {

// A four-stage inference pipeline over 82 layers (21 21 20 20) that does not fit, with the
// layouts of its GPUs that do.
LayoutPrediction uneven_pipeline(const Prediction& p) {
  LayoutPrediction lp;
  lp.layout.pp = 4;
  lp.layout.tp = 2;
  lp.gpus = 8;
  lp.step_time = p.step_time;
  lp.bubble_fraction = 0.75;
  for (int s = 0; s < 4; ++s) {
    RankPrediction r;
    r.stage = s;
    r.layers = s < 2 ? 21 : 20;
    r.prediction = p;
    lp.ranks.push_back(r);
  }
  lp.fits = false;
  lp.does_not_fit = "stage 0 needs 91.3 GiB of 80.0 GiB";
  lp.fit_searched = true;
  FittingLayout a;
  a.layout.tp = 8;
  a.tokens_per_second_per_gpu = 1234.4;
  FittingLayout b;
  b.layout.tp = 4;
  b.layout.pp = 2;
  b.micro_batch = 2;  // inference: the batch follows from dp, not shown
  b.tokens_per_second_per_gpu = 987;
  lp.layouts_that_fit = {a, b};
  return lp;
}

}  // namespace

TEST_CASE("report parallel layout: uneven stages, the inference bubble, the layouts that fit") {
  RunResult r = hand_result();
  r.backend = "none";
  for (auto& s : r.steps) s.measured.reset();
  r.steps[2].layout = uneven_pipeline(r.steps[2].predicted);
  const std::string t = format_table({r});
  CHECK(contains(t, "Parallel layout"));
  CHECK(contains(t, "· stages: 21 layers on stages 0-1, 20 on stages 2-3 (uneven)\n"));
  CHECK(contains(t, "75.0%"));
  CHECK(contains(t, "inference: the batch passes the stages in turn"));
  CHECK(contains(t, "does not fit: stage 0 needs 91.3 GiB of 80.0 GiB; fits: tp=8 (1,234 tok/s/GPU), "
                    "tp=4 pp=2 1f1b (987 tok/s/GPU)"));
  // Even stages say nothing.
  RunResult even = r;
  for (RankPrediction& rank : even.steps[2].layout->ranks) rank.layers = 20;
  CHECK_FALSE(contains(format_table({even}), "stages:"));
  // Searched, and none fit.
  RunResult none = r;
  none.steps[2].layout->layouts_that_fit.clear();
  CHECK(contains(format_table({none}), "does not fit: stage 0 needs 91.3 GiB of 80.0 GiB; no layout of 8 GPUs fits"));

  const auto doc = nlohmann::json::parse(format_json({r}));
  const auto& par = doc.at("results").at(0).at("steps").at(2).at("predicted").at("parallel");
  CHECK(par.at("stages") == "21 layers on stages 0-1, 20 on stages 2-3 (uneven)");
  CHECK(par.at("ranks").at(3).at("layers") == 20);
  CHECK(par.at("bubble_fraction").get<double>() == approx(0.75));
  REQUIRE(par.at("layouts_that_fit").size() == 2);
  CHECK(par.at("layouts_that_fit")[1].at("layout") == "tp=4 pp=2 1f1b");
  CHECK(par.at("layouts_that_fit")[1].at("micro_batch") == 2);
  CHECK(par.at("layouts_that_fit")[0].at("tokens_per_s_per_gpu").get<double>() == approx(1234.4));
}

TEST_CASE("report: a training layout that fits names its micro-batch where it differs") {
  LayoutFigures l;
  l.gpus = 8;
  CHECK(fitting_layouts_text(l, Workload{}).empty());  // nothing searched
  l.fit_searched = true;
  CHECK(fitting_layouts_text(l, Workload{}) == "no layout of 8 GPUs fits");
  Workload w;
  w.phase = Phase::train;
  w.batch = 4;
  FittingLayout same, smaller;
  same.layout.dp = 8;
  same.layout.zero = 1;
  same.micro_batch = 4;
  same.tokens_per_second_per_gpu = 11704;
  smaller.layout.dp = 8;
  smaller.layout.zero = 3;
  smaller.micro_batch = 1;
  smaller.tokens_per_second_per_gpu = 9000;
  l.layouts_that_fit = {same, smaller};
  CHECK(fitting_layouts_text(l, w) == "fits: dp=8 zero=1 (11,704 tok/s/GPU), dp=8 zero=3 mb=1 (9,000 tok/s/GPU)");
}
