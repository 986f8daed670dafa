// predict(): every op priced by the roofline (roofline.cpp), the step timed by the stream
// timeline (timeline.cpp), memory by the liveness walk (memory_model.cpp), plus MFU.
#include "core/cost/cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/cost/roofline.hpp"
#include "core/graph/op_metrics.hpp"

namespace perfsim {

namespace {

// Bytes of the buffer a collective reduces or gathers: as the op states it (a bucket, the full
// tensor behind shards), else the largest tensor it touches.
double collective_payload(const Op& op, const Graph& g) {
  if (op.attrs.payload_bytes > 0) return op.attrs.payload_bytes;
  double payload = 0;
  for (int id : op.inputs) payload = std::max(payload, g.tensor(id).bytes());
  for (int id : op.outputs) payload = std::max(payload, g.tensor(id).bytes());
  return payload;
}

OpCost price_op(const Op& op, const Graph& g, const Hardware& hw, const ClassEfficiencies& eff) {
  if (op.kind == OpKind::host) {
    // Host work has a fixed cost given by the builder; it launches no kernel.
    OpCost c;
    c.op = op.id;
    c.priced_as = op.dtype;
    c.time = op.attrs.host_seconds;
    return c;
  }
  // An upload or download crosses the host link once and launches like a kernel. A CPU
  // without a link description has none to cross: its "device" is host memory, so its copies
  // are memcpys priced by the roofline below, as device-to-device copies are.
  if (const Tensor* host = host_side(op, g);
      host != nullptr && (hw.kind != "cpu" || hw.pcie.bandwidth > 0)) {
    OpCost c = roofline_cost(op, 0, 0, hw, g.graphed, eff);  // launch cost only
    c.bytes = host->bytes();
    c.memory_time = transfer_time(c.bytes, host->residence == Residence::host_pinned, hw);
    c.time = c.memory_time + c.launch_time;
    return c;
  }
  const double flops = op_flops(op, g);
  const double bytes = op_bytes(op, g);
  if (op.kind == OpKind::collective && op.attrs.group > 1) {
    if (const std::optional<CollectivePrice> t =
            price_collective(op.attrs.collective, op.attrs.group, collective_payload(op, g), hw,
                             op.attrs.group_stride)) {
      OpCost c = roofline_cost(op, 0, 0, hw, g.graphed, eff);  // launch cost only
      c.flops = op.dtype == DType::int32 ? 0 : flops;
      c.bytes = bytes;
      c.intensity = bytes > 0 ? c.flops / bytes : 0;
      c.memory_time = t->seconds;
      c.time = c.memory_time + c.launch_time;
      c.calibrated = t->fitted;
      return c;
    }
  }
  return roofline_cost(op, flops, bytes, hw, g.graphed, eff);
}

// What the prediction was priced from, for report headers: a calibrated profile says where
// and when it was measured and how many of the graph's ops its tables covered.
std::string describe_profile(const Hardware& hw, const std::vector<OpCost>& ops) {
  if (!hw.calibrated)
    return hw.kind == "cpu" ? "estimated from the CPU model, uncalibrated" : "datasheet, uncalibrated";
  const Provenance& m = hw.calibration.measured_on;
  const auto fitted = std::count_if(ops.begin(), ops.end(), [](const OpCost& c) { return c.calibrated; });
  std::string where;
  if (!m.device.empty()) where += " on " + m.device;
  if (!m.date.empty()) where += " " + m.date;
  std::string text = fmt::format("calibrated{}; {} of {} ops from fitted tables", where, fitted, ops.size());
  if (const std::string stale = kernels_freshness(m); !stale.empty()) text += "; " + stale;
  return text;
}

// An eager step on a profile that models host dispatch: each op also waits for the host to
// issue it (host_paced_waits, one pass over the graph as built). The wait joins the op's time,
// as it does in per-op events measured on the device, and the issue no longer needs charging
// to stream 0 separately. A launch the device waits for also pays its latency (launch_wait).
void pace_by_host(const Graph& g, const Hardware& hw, bool copy_engines, std::vector<OpCost>& ops) {
  std::vector<double> device;
  std::vector<HostIssue> issue;
  device.reserve(ops.size());
  issue.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = g.ops[i];
    device.push_back(ops[i].time);
    // Host ops are the host's own work; they issue no kernel.
    if (op.kind == OpKind::host) issue.push_back(HostIssue{0, 0, 1});
    else issue.push_back(HostIssue{hw.dispatch_fixed(op.kind), hw.dispatch(op.kind), kernel_launches(op)});
  }
  const std::vector<double> waits = host_paced_waits(g, device, issue, copy_engines, hw.launch_wait);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    ops[i].dispatch_time = issue[i].seconds();
    ops[i].host_wait = waits[i];
    ops[i].time += waits[i];
  }
}

}  // namespace

double Prediction::tokens_per_second(const Graph& g) const {
  return step_time > 0 ? g.workload.tokens_per_step() / step_time : 0.0;
}

OpCost predict_op(const Op& op, const Graph& g, const Hardware& hw) {
  return price_op(op, g, hw, ClassEfficiencies::of(hw));
}

Prediction predict(const Graph& g, const Hardware& hw) {
  Prediction p;
  p.hardware = hw.name;
  p.calibrated = hw.calibrated;
  p.peak_flops = hw.peak_flops;
  p.memory_bandwidth = hw.memory_bandwidth;
  p.memory_capacity = hw.memory_bytes;
  // A CPU has no datasheet readable from the OS: its profile is estimated (core/cost/host_cpu.cpp).
  p.ops.reserve(g.ops.size());
  const ClassEfficiencies eff = ClassEfficiencies::of(hw);

  // Model FLOPs (matrix products, recomputed ops excluded) per dtype, for gemms and for all
  // products; hardware FLOPs count every product the step performs.
  std::array<double, dtype_count> gemm_flops{}, model_flops{};
  std::array<bool, dtype_count> lacking{};
  double hardware_flops = 0;
  for (const Op& op : g.ops) {
    OpCost c = price_op(op, g, hw, eff);
    const auto dt = static_cast<std::size_t>(op.dtype);
    p.flops += c.flops * op.count;
    const double share = op.count * op.attrs.model_share;
    hardware_flops += op_matmul_flops(op, g, false) * share;
    if (!op.recomputed) {
      const double useful = op_matmul_flops(op, g, true) * share;
      model_flops[dt] += useful;
      if (op.kind == OpKind::gemm) gemm_flops[dt] += useful;
      p.model_flops += useful;
    }
    if (!c.supported) lacking[dt] = true;
    p.ops.push_back(c);
  }
  const bool copy_engines = hw.kind == "gpu";
  if (!g.graphed && hw.models_dispatch()) pace_by_host(g, hw, copy_engines, p.ops);
  p.profile = describe_profile(hw, p.ops);
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    p.time_by_class[class_of(g.ops[i].kind)] += p.ops[i].time * g.ops[i].count;
  for (int d = 0; d < dtype_count; ++d)
    if (lacking[static_cast<std::size_t>(d)])
      p.unsupported.emplace_back(name_of(static_cast<DType>(d)));

  p.host_time = hw.host_overhead;
  Timeline timeline = timeline_spans(g, p.ops, copy_engines, hw.collective_sm_share());
  const double makespan = timeline.makespan;
  p.timeline = std::move(timeline.ops);
  p.step_time = makespan + p.host_time;
  std::vector<OpCost> without = p.ops;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    if (g.ops[i].kind != OpKind::collective) continue;
    p.communication_time += p.ops[i].time * g.ops[i].count;
    without[i].time = 0;
    without[i].launch_time = 0;
  }
  if (p.communication_time > 0)
    p.exposed_communication = makespan - timeline_makespan(g, without, copy_engines, hw.collective_sm_share());
  p.memory = predict_memory(g, hw, true);
  p.memory_executed = predict_memory(g, hw, false);
  // Unknown capacity (0) cannot rule a run out.
  p.fits = hw.memory_bytes <= 0 || p.memory.peak <= hw.memory_bytes;

  // MFU (Chowdhery et al. 2022, PaLM App. B; Korthikanti et al. 2022): model FLOPs per
  // second over the peak of the precision carrying most gemm FLOPs (most products without gemms).
  const auto& weights =
      *std::max_element(gemm_flops.begin(), gemm_flops.end()) > 0 ? gemm_flops : model_flops;
  const auto main =
      static_cast<DType>(std::max_element(weights.begin(), weights.end()) - weights.begin());
  const std::optional<DType> priced = priced_dtype(main, hw);
  const double peak = priced && *priced != DType::int32 ? hw.peak(*priced) : 0.0;
  p.mfu_peak = peak;
  p.mfu = p.step_time > 0 && peak > 0 ? p.model_flops / (p.step_time * peak) : 0.0;
  p.hfu = p.step_time > 0 && peak > 0 ? hardware_flops / (p.step_time * peak) : 0.0;
  return p;
}

}  // namespace perfsim
