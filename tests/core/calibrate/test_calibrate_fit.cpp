// `perfsim calibrate`'s fit: hand-checkable curves, tables, lines and links, then the whole
// calibration against a fake backend whose times come from known efficiencies, launch costs,
// a known host link and known collectives, which the fitted profile must give back.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "approx.hpp"
#include "core/calibrate/calibrate.hpp"
#include "core/calibrate/fit.hpp"
#include "core/calibrate/graphs.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/roofline.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"

using namespace perfsim;
using perfsim::test::approx;

TEST_CASE("calibrate fit: kernel seconds subtract the graph gap of each launch, floored at a tenth") {
  CHECK(kernel_seconds(10e-6, 2e-6, 1) == approx(8e-6));
  CHECK(kernel_seconds(2e-6, 2e-6, 1) == approx(0.2e-6));
  CHECK(kernel_seconds(10e-6, 2e-6, 4) == approx(2e-6));   // an unfused AdamW's four sweeps
  CHECK(kernel_seconds(10e-6, 2e-6, 0) == approx(8e-6));   // no count: one launch
}

TEST_CASE("calibrate points: one CSV row per point, its shape, curve and times, quoted where needed") {
  MeasuredPoint p;
  p.source = "cal-x decode 1x256 +bf16,odd";
  p.op.name = "layer0.attn.flash_attention";
  p.op.kind = OpKind::flash_attention;
  p.op.dtype = DType::bf16;
  p.op.attrs.batch = 2;
  p.op.attrs.heads = 8;
  p.op.attrs.kv_heads = 2;
  p.op.attrs.head_dim = 128;
  p.op.attrs.seq_q = 1;
  p.op.attrs.seq_kv = 256;
  p.curve.key = "flash_attention/bf16/memory/decode";
  p.curve.finer_key = "flash_attention/bf16/memory/decode_q4";
  p.curve.roofline_seconds = 2e-6;
  p.curve.curve_seconds = 2e-6;
  p.flops = 1e6;
  p.bytes = 6.7e6;
  p.measured_seconds = 5e-6;
  p.kernel_seconds = 4e-6;
  p.efficiency = 0.5;
  const std::string csv = points_to_csv({p});
  const std::string header = csv.substr(0, csv.find('\n'));
  CHECK(header.rfind("source,op,kind,dtype,key,finer_key,fallback_key,bound,m,n,k,batch,heads,", 0) == 0);
  CHECK(csv.substr(header.size() + 1) ==
        "\"cal-x decode 1x256 +bf16,odd\",layer0.attn.flash_attention,flash_attention,bf16,"
        "flash_attention/bf16/memory/decode,flash_attention/bf16/memory/decode_q4,,memory,"
        "0,0,0,2,8,2,128,1,256,0,0,0,0,1e+06,6.7e+06,2e-06,2e-06,5e-06,4e-06,0.5,,\n");
  p.eager_seconds = 9e-6;
  p.host_seconds = 6e-6;
  const std::string eager = points_to_csv({p});
  CHECK(eager.substr(eager.size() - 23) == ",4e-06,0.5,9e-06,6e-06\n");
}

TEST_CASE("calibrate fit: curves keep separate points and merge those of one bin") {
  const EfficiencyCurve c = fit_curve({{1e-4, 0.8}, {1e-6, 0.2}, {1e-5, 0.4}});
  REQUIRE(c.seconds.size() == 3);
  CHECK(c.seconds[0] == approx(1e-6));
  CHECK(c.efficiency[2] == approx(0.8));
  // Half a decade between 1e-6 and 1e-5: sqrt(0.2 · 0.4) in log space.
  CHECK(c.at(std::sqrt(1e-6 * 1e-5)) == approx(std::sqrt(0.08)));
  // 1.0 and 1.1 µs share a quarter-decade bin: medians 1.05 µs, 0.3.
  const EfficiencyCurve m = fit_curve({{1e-6, 0.2}, {1.1e-6, 0.4}, {1e-5, 0.5}});
  REQUIRE(m.seconds.size() == 2);
  CHECK(m.seconds[0] == approx(1.05e-6));
  CHECK(m.efficiency[0] == approx(0.3));
  CHECK_THROWS_AS((void)fit_curve({{0.0, 0.5}}), std::invalid_argument);
}

TEST_CASE("calibrate fit: lines, host links and collectives come back exactly") {
  // t = 3 µs + bytes / 20 GB/s, with an eager launch of 1 µs in the measurement.
  const std::vector<double> bytes = {65536, 1 << 20, 16 << 20, 256 << 20};
  std::vector<double> t, pageable;
  for (double b : bytes) {
    t.push_back(1e-6 + 3e-6 + b / 20e9);
    pageable.push_back(1e-6 + 3e-6 + b / 20e9 + b / 5e9);
  }
  const Link l = fit_host_link(bytes, t, 1e-6);
  CHECK(l.bandwidth == approx(20e9));
  CHECK(l.latency == approx(3e-6));
  CHECK(fit_host_copy_bandwidth(bytes, pageable, l) == approx(5e9));
  // All-reduce over 4 ranks: wire = 2·3/4 of the payload = 1.5 × payload.
  CHECK(wire_bytes(Collective::all_reduce, 4, 1000) == approx(1500));
  CHECK(wire_bytes(Collective::all_gather, 4, 1000) == approx(750));
  CHECK_THROWS_AS((void)fit_line({1.0}, {2.0}), std::invalid_argument);
}

TEST_CASE("calibrate fit: a collective keeps its measured times, made non-decreasing") {
  // Given out of order, with 1 MiB timed below 64 KiB (noise): the two pool to their mean,
  // 11 µs, and every other point is kept.
  const CollectiveFit f = fit_collective(Collective::all_reduce, 2, {16 << 20, 65536, 1 << 20, 8192},
                                         {80e-6, 12e-6, 10e-6, 9e-6});
  REQUIRE(f.payload.size() == 4);
  CHECK(f.payload == std::vector<double>{8192, 65536, 1 << 20, 16 << 20});
  CHECK(f.seconds[0] == approx(9e-6));
  CHECK(f.seconds[1] == approx(11e-6));
  CHECK(f.seconds[2] == approx(11e-6));
  CHECK(f.seconds[3] == approx(80e-6));
  // A payload timed twice is one point at the mean.
  const CollectiveFit twice = fit_collective(Collective::send_recv, 2, {4096, 4096, 1 << 20}, {8e-6, 10e-6, 20e-6});
  CHECK(twice.payload == std::vector<double>{4096, 1 << 20});
  CHECK(twice.seconds[0] == approx(9e-6));
  // A repeated payload timed below the one before: its two times and that one pool, (10 + 8 + 9) / 3.
  const CollectiveFit pooled = fit_collective(Collective::all_gather, 2, {8192, 65536, 65536, 1 << 20},
                                              {10e-6, 8e-6, 9e-6, 20e-6});
  CHECK(pooled.payload == std::vector<double>{8192, 65536, 1 << 20});
  CHECK(pooled.seconds[0] == approx(9e-6));
  CHECK(pooled.seconds[1] == approx(9e-6));
  CHECK(pooled.seconds[2] == approx(20e-6));
  // Flat times (no growth) and a single payload fit nothing.
  CHECK_THROWS_AS((void)fit_collective(Collective::all_gather, 2, {8192, 65536}, {9e-6, 8e-6}), std::invalid_argument);
  CHECK_THROWS_AS((void)fit_collective(Collective::all_gather, 2, {8192}, {9e-6}), std::invalid_argument);
}

TEST_CASE("calibration: a collective's time is linear in bytes between measured sizes") {
  CollectiveFit f;
  f.payload = {8192, 1 << 20, 64 << 20};
  f.seconds = {10e-6, 20e-6, 220e-6};
  // Below the smallest size: its time. Between: the line through the two neighbours; 32.5 MiB
  // is half way from 1 MiB to 64 MiB, so half way from 20 to 220 µs.
  CHECK(f.time(100, 0) == approx(10e-6));
  CHECK(f.time(8192, 0) == approx(10e-6));
  CHECK(f.time(1 << 20, 0) == approx(20e-6));
  CHECK(f.time(32.5 * (1 << 20), 0) == approx(120e-6));
  // Beyond the largest: the last range's line, 200 µs per 63 MiB.
  CHECK(f.time(127 << 20, 0) == approx(420e-6));
  // The one-line form: latency + wire / bandwidth.
  const CollectiveFit line{5e-6, 100e9, {}, {}};
  CHECK(line.time(1e9, 1.5e9) == approx(5e-6 + 15e-3));
  // All-reduce over 4 ranks: wire = 2·3/4 of the payload = 1.5 × payload.
  Hardware hw;
  hw.nvlink = {400e9, 2e-6};
  hw.calibration.collectives[{Collective::all_reduce, 4}] = f;
  CHECK(*collective_time(Collective::all_reduce, 4, 32.5 * (1 << 20), hw) == approx(120e-6));
}

TEST_CASE("calibrate fit: the graph launch is the launch chain's median per-op time") {
  CHECK(fit_launch_graph({2e-6, 2.2e-6, 1.8e-6}) == approx(2e-6));
  CHECK_THROWS_AS((void)fit_launch_graph({}), std::invalid_argument);
}

TEST_CASE("calibrate fit: a skipped GEMM cell takes the best measured efficiency below it") {
  // 2 × 2 × 1 grid; the (m=64, n=4096) cell was over budget. Below it: (1,1024) 0.1,
  // (1,4096) 0.6 and (64,1024) 0.5, which has the most FLOPs but not the best efficiency.
  const GemmTable t = fill_gemm_table({1, 64}, {1024, 4096}, {512}, {0.1, 0.6, 0.5, std::nullopt});
  CHECK(t.cell(1, 1, 0) == approx(0.6));
  CHECK(t.at(64, 4096, 512) == approx(0.6));
  // Measured cells keep their own values.
  CHECK(t.cell(0, 0, 0) == approx(0.1));
  CHECK(t.cell(1, 0, 0) == approx(0.5));
  // A cell faster than the roofline (efficiency above 1) is mistimed: never a bound.
  const GemmTable u = fill_gemm_table({1, 64}, {1024, 4096}, {512}, {0.1, 1.4, 0.5, std::nullopt});
  CHECK(u.cell(1, 1, 0) == approx(0.5));
  // Nothing measured below a cell: the measured cell with the most FLOPs ((64,1024): 0.5).
  const GemmTable v = fill_gemm_table({1, 64}, {1024, 4096}, {512}, {std::nullopt, 0.7, 0.5, std::nullopt});
  CHECK(v.cell(0, 0, 0) == approx(0.5));
  CHECK(v.cell(1, 1, 0) == approx(0.7));
  CHECK_THROWS_AS((void)fill_gemm_table({1}, {1}, {1}, {std::nullopt}), std::invalid_argument);
}

TEST_CASE("calibrate graphs: packing interleaves sizes and respects the byte cap") {
  const auto groups = pack_interleaved({1, 100, 2, 50, 3}, 110);
  // Smallest, largest, ...: sizes 1, 100, 2, 50, 3 -> [1, 100, 2] (103), [50, 3] (53).
  REQUIRE(groups.size() == 2);
  CHECK(groups[0] == std::vector<std::size_t>{0, 1, 2});
  CHECK(groups[1] == std::vector<std::size_t>{3, 4});
  const Graph g = gemm_cells_graph({{4, 8, 16, DType::fp8, 0}});
  CHECK(g.tensor(g.ops[0].inputs[1]).dtype == DType::fp8);
  CHECK(g.tensor(g.ops[0].inputs[0]).dtype == DType::bf16);
  CHECK(gemm_cell_bytes({4, 8, 16, DType::fp8, 0}) == approx((4 * 16 + 4 * 8) * 2 + 16 * 8));
}

namespace {

// Datasheet of the fake device: slow enough that every op's kernel is far above the launch.
Hardware fake_datasheet() {
  Hardware hw;
  hw.name = "Fake-GPU";
  hw.peak_flops[static_cast<int>(DType::fp32)] = 1e12;
  hw.peak_flops[static_cast<int>(DType::bf16)] = 4e12;
  hw.memory_bytes = 80e9;
  hw.memory_bandwidth = 1e10;
  hw.pcie = {64e9, 1e-6};
  hw.host_copy_bandwidth = 1e10;
  hw.compute_efficiency[OpClass::gemm] = 0.9;  // datasheet guesses the fit must replace
  hw.memory_efficiency[OpClass::norm] = 0.9;
  return hw;
}

constexpr double true_launch_graph = 1e-7, true_launch_eager = 4e-7, true_launch_wait = 5e-7;
constexpr double true_dispatch = 1e-6;  // host seconds to issue any op eagerly
constexpr double true_pcie_latency = 5e-6, true_pcie_bw = 25e9, true_staging_bw = 8e9;
constexpr double true_coll_latency = 10e-6, true_coll_bw = 90e9;

// GEMMs: 0.1 with unaligned rows, else 0.2 for decode-sized m and 0.6 otherwise; other
// kernels 0.5 memory-bound, 0.25 compute.
double true_efficiency(const Op& op, const CalibrationPoint& p) {
  if (op.kind == OpKind::gemm && !gemm_rows_aligned(op)) return 0.1;
  if (op.kind == OpKind::gemm) return op.attrs.m * op.attrs.batch <= 8 ? 0.2 : 0.6;
  return p.compute_bound ? 0.25 : 0.5;
}

class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(Hardware hw) : m_hw(std::move(hw)) {}
  [[nodiscard]] std::string name() const override { return "fake"; }
  [[nodiscard]] DeviceInfo device() const override {
    DeviceInfo d;
    d.backend = "fake";
    d.name = "Fake GPU 80GB";
    d.catalog_name = "Fake-GPU";
    d.driver = "1.0";
    d.runtime = "fake runtime 2.0";
    return d;
  }
  [[nodiscard]] std::string unsupported_reason(const Op&, const Graph&) const override { return ""; }
  [[nodiscard]] Measurement run(const Graph& g, const RunOptions& o) override {
    Measurement m;
    m.backend = "fake";
    if (g.graphed) m.op_timing = "event nodes";
    // Kernels run for their true efficiency plus the launch of their mode; eagerly, the host
    // issues one op per true_dispatch, and a kernel the device waits for starts
    // true_launch_wait after its issue.
    std::vector<double> device;
    for (const Op& op : g.ops) {
      const OpCost c = predict_op(op, g, m_hw);
      const CalibrationPoint p = calibration_point(op, c, m_hw);
      device.push_back(p.roofline_seconds / true_efficiency(op, p) + (g.graphed ? true_launch_graph : true_launch_eager));
    }
    // A timing glitch on the first GEMM-cell graph: its cells read 5x faster than they ran.
    const bool cells = std::all_of(g.ops.begin(), g.ops.end(), [](const Op& op) { return op.kind == OpKind::gemm; });
    if (cells && glitches > 0) {
      --glitches;
      for (double& d : device) d /= 5;
    }
    const std::vector<double> waits =
        g.graphed ? std::vector<double>(g.ops.size(), 0.0)
                  : host_paced_waits(g, device, std::vector<HostIssue>(g.ops.size(), HostIssue{0, true_dispatch, 1}),
                                     true, true_launch_wait);
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      OpMeasurement om;
      om.op = op.id;
      om.executed = true;
      if (const Tensor* host = host_side(op, g)) {
        om.median = true_launch_eager + true_pcie_latency + host->bytes() / true_pcie_bw +
                    (host->residence == Residence::host_pageable ? host->bytes() / true_staging_bw : 0.0);
      } else {
        om.median = device[i] + waits[i];
        if (!g.graphed) om.host = true_dispatch;
        if (!g.graphed && o.device_times) om.device = device[i];  // queued: no wait for the host
        held_ops += !g.graphed && o.device_times ? 1 : 0;
      }
      om.min = om.median;
      m.ops.push_back(om);
    }
    return m;
  }
  [[nodiscard]] int gpu_count() const override { return 2; }
  [[nodiscard]] std::vector<double> time_collective(Collective c, int group,
                                                    const std::vector<double>& payload) override {
    std::vector<double> t;
    for (double b : payload) t.push_back(true_coll_latency + wire_bytes(c, group, b) / true_coll_bw);
    return t;
  }

  int held_ops = 0;  // ops of eager runs that were also timed held
  int glitches = 0;  // GEMM-cell graphs still to time wrongly

 private:
  Hardware m_hw;
};

ModelConfig fake_model() {
  ModelConfig m;
  m.name = "fake-llama";
  m.layers = 2;
  m.hidden = 256;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = 512;
  m.vocab = 1000;
  m.max_seq = 1024;
  m.activation = Activation::swiglu;
  m.norm = NormKind::rmsnorm;
  m.rope = true;
  return m;
}

CalibrationPlan fake_plan() {
  CalibrationPlan p;
  p.mode = "quick";
  p.graph_mode = true;
  p.gemm.dtypes = {DType::bf16, DType::fp8};  // the fake datasheet has no fp8: skipped
  p.gemm.m = {1, 64};
  p.gemm.n = {1024, 4096};
  p.gemm.k = {1024, 2048};
  // Largest cells (n = 4096, k = 2048) move 17 MB: 1.7 ms at 10 GB/s, over this budget.
  p.gemm.max_roofline_seconds = 1.5e-3;
  p.gemm.max_cell_bytes = 1e9;
  p.gemm.max_graph_bytes = 20e6;
  p.unaligned_gemm = p.gemm;
  p.unaligned_gemm.dtypes = {DType::bf16};
  p.unaligned_gemm.n = {1024, 1025};  // the n = 1024 cells are aligned: the grid has them
  p.launch_chain_ops = 20;
  p.launch_chain_elements = 1;
  Workload prefill;
  prefill.phase = Phase::prefill;
  prefill.prompt = 64;
  Workload decode;
  decode.batch = 2;
  decode.prompt = 200;
  decode.new_tokens = 2;
  p.kernels.push_back({fake_model(), prefill, {StackStep{"fp32", {}, ""}}, true});
  p.kernels.push_back({fake_model(), decode, {StackStep{"+bf16", {PassSpec{"bf16", std::nullopt}}, ""}}, false});
  // Decode attention fused, contiguous and paged: curves by query rows per K/V row, and paged.
  for (const bool paged : {false, true}) {
    StackStep s{"+flash", {PassSpec{"bf16", std::nullopt}, PassSpec{"flash_attention", std::nullopt}}, ""};
    if (paged) s.passes.push_back(PassSpec{"paged_kv", std::nullopt});
    p.kernels.push_back({fake_model(), decode, {s}, false});
  }
  p.copy_bytes = {65536, 1 << 20, 16 << 20};
  p.collectives = {Collective::all_reduce, Collective::all_gather};
  p.collective_bytes = {8192, 1 << 20, 64 << 20};
  return p;
}

}  // namespace

TEST_CASE("calibrate: a fake backend's known efficiencies, launches and links come back") {
  const Hardware base = fake_datasheet();
  FakeBackend backend(base);
  backend.glitches = 1;
  CalibrateOptions o;
  o.date = "2026-01-02";
  int progress_calls = 0;
  o.progress = [&](const CalibrateProgress&) { ++progress_calls; };
  const CalibrateResult r = calibrate(backend, base, fake_plan(), o);
  const Hardware& hw = r.hw;
  CHECK(progress_calls > 0);
  CHECK(hw.calibrated);
  CHECK(hw.name == "fake-gpu-local");
  CHECK(hw.base == "Fake-GPU");
  CHECK(hw.source == "perfsim calibrate 2026-01-02");
  CHECK(hw.calibration.measured_on.runtime == "fake runtime 2.0");
  CHECK(hw.calibration.measured_on.mode == "quick");
  CHECK(hw.calibration.measured_on.op_timing == "event nodes");  // how its graph mode timed ops

  // The chain's one-element adds (12 bytes at 10 GB/s and efficiency 0.5: 2.4 ns) stay in the
  // graph floor; the eager launch's costs over it come from candidates 6.5% apart (half a
  // step: 3.3%), the host's issue per op from the measured host times.
  constexpr double chain_kernel = 12.0 / 1e10 / 0.5;
  CHECK(hw.launch_graph == approx(true_launch_graph + chain_kernel));
  CHECK(hw.launch_eager - hw.launch_graph == approx(true_launch_eager - true_launch_graph).epsilon(0.033));
  CHECK(hw.launch_wait == approx(true_launch_wait).epsilon(0.033));
  CHECK(backend.held_ops > 0);  // the eager pairs were also timed held (fit_dispatch)
  CHECK(hw.dispatch(OpKind::rmsnorm) == approx(true_dispatch));
  CHECK(hw.dispatch_eager == approx(true_dispatch));

  REQUIRE(hw.calibration.gemm.count(DType::bf16) == 1);
  CHECK(hw.calibration.gemm.count(DType::fp8) == 0);
  // The glitched graph was measured again; the table holds the second run's true values.
  CHECK(backend.glitches == 0);
  const auto bf16_sweep = std::find_if(r.sweeps.begin(), r.sweeps.end(),
                                       [](const SweepSummary& s) { return s.sweep == "gemm bf16"; });
  REQUIRE(bf16_sweep != r.sweeps.end());
  CHECK(bf16_sweep->remeasured == 1);
  CHECK(bf16_sweep->fitted.find("1 graph(s) measured twice") != std::string::npos);
  // The collectives' line names the largest group's all-reduce at its smallest and largest
  // buffer: 10 µs + 8 KiB / 90 GB/s = 10.1 µs; 10 µs + 64 MiB / 90 GB/s = 756 µs.
  const auto coll_sweep = std::find_if(r.sweeps.begin(), r.sweeps.end(),
                                       [](const SweepSummary& s) { return s.sweep == "collectives"; });
  REQUIRE(coll_sweep != r.sweeps.end());
  CHECK(coll_sweep->fitted == "2 fits over groups of 2..2; all_reduce over 2: 10.1 µs at 8.00 KiB, 756 µs at 64.0 MiB");
  const GemmTable& t = hw.calibration.gemm.at(DType::bf16);
  CHECK(t.at(1, 1024, 1024) == approx(0.2).epsilon(1e-3));
  CHECK(t.at(64, 1024, 2048) == approx(0.6).epsilon(1e-3));
  // Over budget, filled from the largest measured cell below it.
  CHECK(t.cell(1, 1, 1) == approx(0.6).epsilon(1e-3));
  CHECK(t.cell(0, 1, 1) == approx(0.2).epsilon(1e-3));

  REQUIRE(hw.calibration.kernels.count("rmsnorm/fp32/memory") == 1);
  REQUIRE(hw.calibration.kernels.count("rmsnorm/bf16/memory") == 1);
  // GEMMs of the model graphs give curves only for dtypes without a table (here fp32).
  CHECK(hw.calibration.kernels.count("gemm/fp32/memory") == 1);
  CHECK(hw.calibration.kernels.count("gemm/bf16/memory") == 0);
  // Unaligned GEMM cells give curves of their own, beside the bf16 grid.
  REQUIRE(hw.calibration.kernels.count("gemm/bf16/memory/unaligned") == 1);
  for (double e : hw.calibration.kernels.at("gemm/bf16/memory/unaligned").efficiency)
    CHECK(e == approx(0.1).epsilon(0.01));
  // ... and of their layout: the cells run with B stored [k, n] (n = 1025 leaves B and C
  // unaligned) and [n, k] (C only), the one-row cells (m = 1) on curves of their own.
  for (const char* layout : {"unaligned_nn_bc", "unaligned_nt_c", "unaligned_nn_bc_skinny", "unaligned_nt_c_skinny"}) {
    CAPTURE(layout);
    const std::string key = std::string("gemm/bf16/memory/") + layout;
    REQUIRE(hw.calibration.kernels.count(key) == 1);
    for (double e : hw.calibration.kernels.at(key).efficiency) CHECK(e == approx(0.1).epsilon(0.01));
  }
  // Decode attention feeds the pooled curve and that of its rows (4 heads on 2: 2 rows, "q4");
  // paged ops feed curves of their own.
  CHECK(hw.calibration.kernels.count("flash_attention/bf16/memory/decode") == 1);
  CHECK(hw.calibration.kernels.count("flash_attention/bf16/memory/decode_q4") == 1);
  CHECK(hw.calibration.kernels.count("flash_attention/bf16/memory/decode_q1") == 0);
  CHECK(hw.calibration.kernels.count("flash_attention/bf16/memory/paged") == 1);
  CHECK(hw.calibration.kernels.count("kv_append/bf16/memory/paged") == 1);
  // Every kernel's time is taken off the fitted graph floor, which holds the chain op's 2.4 ns:
  // the shortest fake kernels (about 200 ns) come back up to 1.2% more efficient.
  for (const auto& entry : hw.calibration.kernels)
    for (double e : entry.second.efficiency) {
      const std::string& key = entry.first;  // a plain name: doctest's INFO cannot take bindings
      INFO(key);
      const bool compute = key.size() > 8 && key.substr(key.size() - 8) == "/compute";
      if (key.find("/unaligned") != std::string::npos)
        CHECK(e == approx(0.1).epsilon(0.015));
      else if (key.rfind("gemm/", 0) == 0)
        CHECK((e == approx(0.2).epsilon(0.015) || e == approx(0.6).epsilon(0.015)));
      else
        CHECK(e == approx(compute ? 0.25 : 0.5).epsilon(0.015));
    }
  CHECK(hw.memory_efficiency.at(OpClass::norm) == approx(0.5).epsilon(0.01));

  CHECK(hw.pcie.bandwidth == approx(true_pcie_bw).epsilon(1e-3));
  CHECK(hw.pcie.latency == approx(true_pcie_latency).epsilon(1e-2));
  CHECK(hw.host_copy_bandwidth == approx(true_staging_bw).epsilon(1e-3));

  const auto ar = hw.calibration.collectives.find({Collective::all_reduce, 2});
  REQUIRE(ar != hw.calibration.collectives.end());
  // The fake's times are one alpha-beta line: every size between the calibrated ones comes
  // back on it.
  for (double b : {20e3, 3e6, 200e6})
    CHECK(*collective_time(Collective::all_reduce, 2, b, hw) == approx(true_coll_latency + b / true_coll_bw));
  CHECK(hw.calibration.collectives.count({Collective::all_gather, 2}) == 1);

  // Priced with the fitted profile, a GEMM of the grid costs what the fake measured.
  const Graph g = gemm_cells_graph({{64, 1024, 2048, DType::bf16, 0}});
  const OpCost c = predict_op(g.ops[0], g, hw);
  CHECK(c.calibrated);
  Graph replay = g;
  replay.graphed = true;
  FakeBackend again(base);
  CHECK(predict_op(replay.ops[0], replay, hw).time ==
        approx(again.run(replay, {}).ops[0].median).epsilon(1e-3));
}

TEST_CASE("calibrate fit: GEMM curves of a dtype with a table are dropped, others kept") {
  std::map<DType, GemmTable> tables;
  tables[DType::bf16] = GemmTable{{1}, {1024}, {512}, {0.5}};
  std::map<std::string, EfficiencyCurve> curves;
  for (const char* key : {"gemm/bf16/compute", "gemm/bf16/memory", "gemm/fp8/compute", "rmsnorm/bf16/memory"})
    curves[key] = EfficiencyCurve{{1e-6}, {0.5}};
  drop_curves_shadowed_by_tables(tables, curves);
  CHECK(curves.size() == 2);
  CHECK(curves.count("gemm/fp8/compute") == 1);
  CHECK(curves.count("rmsnorm/bf16/memory") == 1);
}
