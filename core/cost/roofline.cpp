// Roofline pricing of one op, the precision fallback, and alpha-beta collectives.
#include "core/cost/roofline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "core/cost/gemm_shape.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"

namespace perfsim {

ClassEfficiencies ClassEfficiencies::of(const Hardware& hw) {
  ClassEfficiencies e;
  for (OpClass c : all_op_classes) {
    const auto i = static_cast<std::size_t>(c);
    e.compute[i] = hw.compute_eff(c);
    e.memory[i] = hw.memory_eff(c);
  }
  return e;
}

namespace {

// Wider precisions to fall back on, in order of preference. Values stored in a narrow format
// can always be widened, so a number still exists when the hardware lacks the format.
std::span<const DType> fallbacks(DType t) {
  static constexpr DType fp32[] = {DType::fp32};
  static constexpr DType tf32[] = {DType::tf32, DType::fp32};
  static constexpr DType bf16[] = {DType::bf16, DType::fp16, DType::fp32};
  static constexpr DType fp16[] = {DType::fp16, DType::bf16, DType::fp32};
  static constexpr DType fp8[] = {DType::fp8, DType::bf16, DType::fp16, DType::fp32};
  static constexpr DType int8[] = {DType::int8, DType::bf16, DType::fp16, DType::fp32};
  switch (t) {
    case DType::tf32:
      return tf32;
    case DType::bf16:
      return bf16;
    case DType::fp16:
      return fp16;
    case DType::fp8:
      return fp8;
    case DType::int8:
      return int8;
    case DType::fp32:
    case DType::int32:
    case DType::int4:  // storage only: its ops compute in a wider type
      break;
  }
  return fp32;
}

// The profile's fitted efficiency for this op, if its tables hold the kernel: aligned GEMMs
// from the (m, n, k) grid of their dtype, every other kind (unaligned GEMMs too) from the curve
// at its calibration point. An unaligned GEMM reads the curve of its layout, else the pooled
// unaligned curve, else the grid; decode attention reads the curve of its query rows per K/V
// row, else the pooled decode curve; a paged op reads its paged curve, else its unpaged one.
// A curve's efficiency at the op's point. Past its largest measured kernel a curve is held at
// its last efficiency, unless a broader curve of the kind (the coarser or unpaged key) measured
// bigger kernels: then that kernel's time is the fixed part a bigger one still pays, and the
// extra work runs at the better of the two curves' rates. A curve fitted on small kernels alone
// (paged KV appends of one row per sequence) would otherwise price a prefill's append of
// thousands of rows at the small kernels' efficiency, ten times too slow.
double beyond_the_curve(std::map<std::string, EfficiencyCurve>::const_iterator curve, const CalibrationPoint& p,
                        const Calibration& cal) {
  const EfficiencyCurve& c = curve->second;
  const double r = p.curve_seconds;
  if (c.seconds.empty() || r <= c.seconds.back()) return c.at(r);
  const double r_max = c.seconds.back();
  const double e_max = c.efficiency.back();
  double e_stream = 0;
  for (const std::string* key : {&p.key, &p.fallback_key}) {
    if (key->empty() || *key == curve->first) continue;
    if (auto broader = cal.kernels.find(*key); broader != cal.kernels.end() && !broader->second.seconds.empty() &&
                                               broader->second.seconds.back() > r_max) {
      e_stream = broader->second.at(r);
      break;
    }
  }
  if (e_max <= 0 || e_stream <= e_max) return c.at(r);
  return r / (r_max / e_max + (r - r_max) / e_stream);
}

// A memory-bound kernel's efficiency is bytes moved over time, much the same at another element
// size. With no curve at the op's precision (a quick calibration times the materialized
// attention ops in fp32 only), the kernel's own curve at another 16- or 32-bit precision is a
// far better guess than the class figure, which priced bf16 softmaxes 3.5x too slow on an H200.
std::map<std::string, EfficiencyCurve>::const_iterator other_precision_curve(const Op& op, const CalibrationPoint& p,
                                                                             DType priced, const Calibration& cal) {
  if (p.compute_bound) return cal.kernels.end();
  static constexpr DType streamed[] = {DType::bf16, DType::fp16, DType::fp32};
  for (const std::string_view variant : {calibration_variant(op), std::string_view()}) {
    for (const DType d : streamed) {
      if (d == priced) continue;
      if (auto it = cal.kernels.find(calibration_key(op.kind, d, false, variant)); it != cal.kernels.end()) return it;
    }
    if (variant.empty()) break;
  }
  return cal.kernels.end();
}

std::optional<double> fitted_efficiency(const Op& op, const OpCost& c, const Hardware& hw) {
  const Calibration& cal = hw.calibration;
  if (cal.empty() || (c.flops <= 0 && c.bytes <= 0)) return std::nullopt;
  const CalibrationPoint p = calibration_point(op, c, hw);
  auto curve = p.finer_key.empty() ? cal.kernels.end() : cal.kernels.find(p.finer_key);
  // Then the op's own curve and its fallbacks (curve_variants): varlen decode attention's,
  // the paged kernel's, the unpaged one's; an fp8 KV cache's before the 16-bit cache's.
  for (const std::string& v : curve_variants(op))
    if (curve == cal.kernels.end()) curve = cal.kernels.find(calibration_key(op.kind, c.priced_as, p.compute_bound, v));
  if (curve == cal.kernels.end() && op.kind != OpKind::gemm) curve = other_precision_curve(op, p, c.priced_as, cal);
  // A GEMM on a weight-only quantized weight reads its own curve where the profile has one.
  const bool own_curve = op.attrs.weight_bits > 0 && curve != cal.kernels.end();
  if (op.kind == OpKind::gemm && ((gemm_rows_aligned(op) && !own_curve) || curve == cal.kernels.end())) {
    if (auto it = cal.gemm.find(c.priced_as); it != cal.gemm.end())
      return it->second.at(static_cast<double>(op.attrs.m * op.attrs.batch),
                           static_cast<double>(op.attrs.n), static_cast<double>(op.attrs.k));
  }
  if (curve == cal.kernels.end()) return std::nullopt;
  return beyond_the_curve(curve, p, cal);
}

}  // namespace

CalibrationPoint calibration_point(const Op& op, const OpCost& c, const Hardware& hw) {
  const double compute = c.flops > 0 && hw.peak(c.priced_as) > 0 ? c.flops / hw.peak(c.priced_as) : 0.0;
  const double memory = c.bytes > 0 && hw.memory_bandwidth > 0 ? c.bytes / hw.memory_bandwidth : 0.0;
  const bool compute_bound = c.flops > 0 && compute >= memory;
  std::string finer = finer_calibration_variant(op);
  if (op.attrs.kv_fp8) finer = varlen_rows_variant(op).empty() ? std::string() : fp8_kv_variant(finer);
  const double roofline = std::max(compute, memory);
  // The key is the op's own curve, the fallback the next of curve_variants: a paged op's
  // unpaged curve, varlen decode attention's paged one. An fp8 KV cache's kernels are others
  // than the 16-bit cache's: curves of their own, the 16-bit cache's where a profile has none
  // (fitted_efficiency reads them all in order); their points feed no finer 16-bit curve (the
  // engine's varlen decode attention feeds its fp8 curve by GQA group).
  const std::vector<std::string> variants = curve_variants(op);
  CalibrationPoint p{calibration_key(op.kind, c.priced_as, compute_bound, variants.front()),
                     roofline, compute_bound, roofline / static_cast<double>(batched_gemm_calls(op)),
                     finer.empty() ? std::string() : calibration_key(op.kind, c.priced_as, compute_bound, finer),
                     variants.size() > 1 ? calibration_key(op.kind, c.priced_as, compute_bound, variants[1])
                                         : std::string()};
  return p;
}

std::optional<DType> priced_dtype(DType t, const Hardware& hw) {
  if (t == DType::int32) return DType::int32;
  for (DType d : fallbacks(t))
    if (hw.supports(d)) return d;
  return std::nullopt;
}

OpCost roofline_cost(const Op& op, double flops, double bytes, const Hardware& hw, bool graphed,
                     const ClassEfficiencies& eff) {
  OpCost c;
  c.op = op.id;
  // int32 tensors hold token ids: ops on them only move data.
  c.flops = op.dtype == DType::int32 ? 0.0 : flops;
  c.bytes = bytes;
  c.intensity = c.bytes > 0 ? c.flops / c.bytes : 0.0;
  const auto cls = static_cast<std::size_t>(class_of(op.kind));

  const std::optional<DType> priced = priced_dtype(op.dtype, hw);
  c.priced_as = priced.value_or(DType::fp32);
  // tf32 is a compute mode over fp32 storage: hardware without it simply computes in fp32.
  c.supported = priced.has_value() &&
                (*priced == op.dtype || (op.dtype == DType::tf32 && *priced == DType::fp32));
  if (c.flops > 0) {
    if (!priced)
      throw ConfigError(
          fmt::format("hardware '{}' has no peak FLOP/s for {} or any wider precision (op '{}'); "
                      "set peak_flops for fp32 at least",
                      hw.name, name_of(op.dtype), op.name));
    if (eff.compute[cls] <= 0)
      throw ConfigError(fmt::format("hardware '{}': compute efficiency for {} must be > 0", hw.name,
                                    name_of(class_of(op.kind))));
    // Compute roof: FLOPs at the datasheet peak scaled by the class efficiency (Williams et al.
    // 2009).
    c.compute_time = c.flops / (hw.peak(*priced) * eff.compute[cls]);
    // A GPU GEMM reaches its class efficiency only with whole waves of tiles and a long K loop
    // (gemm_shape.hpp); a fitted table below, where the profile has one, replaces this.
    if (op.kind == OpKind::gemm && hw.kind == "gpu")
      c.compute_time /= gemm_shape_efficiency(op.attrs.m, op.attrs.n, op.attrs.k, op.attrs.batch, hw.sm_count).factor();
  }
  if (c.bytes > 0) {
    if (hw.memory_bandwidth <= 0 || eff.memory[cls] <= 0)
      throw ConfigError(
          fmt::format("hardware '{}': memory_bandwidth and the {} memory efficiency must be > 0",
                      hw.name, name_of(class_of(op.kind))));
    // Memory roof: bytes at the datasheet bandwidth scaled by the class efficiency (Williams et al.
    // 2009).
    c.memory_time = c.bytes / (hw.memory_bandwidth * eff.memory[cls]);
  }
  // A 2:4 sparse weight's GEMM skips the zeros on the sparse tensor cores: its dense FLOPs at
  // sparse_speedup times the peak (NVIDIA's datasheets: 2× from Ampere on).
  const double sparse = op.attrs.sparse_24 ? std::max(1.0, hw.sparse_speedup) : 1.0;
  c.compute_time /= sparse;
  c.compute_bound = c.flops > 0 && c.compute_time >= c.memory_time;
  // A fitted table for this kernel replaces the class efficiencies: both roofs at the datasheet
  // peaks, divided by the efficiency measured for kernels of this kind and size.
  if (const std::optional<double> fitted = fitted_efficiency(op, c, hw)) {
    c.compute_time = c.flops > 0 ? c.flops / hw.peak(c.priced_as) / *fitted / sparse : 0.0;
    c.memory_time = c.bytes > 0 ? c.bytes / hw.memory_bandwidth / *fitted : 0.0;
    c.compute_bound = c.flops > 0 && c.compute_time >= c.memory_time;
    c.calibrated = true;
  }
  // Fixed cost of each kernel the op launches: CPU-side launch, or its replay cost inside a
  // captured graph (an unfused AdamW's four sweeps pay it four times).
  c.launch_time = (graphed ? hw.launch_graph : hw.launch_eager) * kernel_launches(op);
  // Roofline: the op takes as long as its slower resource (Williams et al. 2009), plus launch.
  c.time = std::max(c.compute_time, c.memory_time) + c.launch_time;
  return c;
}

OpCost roofline_cost(const Op& op, double flops, double bytes, const Hardware& hw, bool graphed) {
  return roofline_cost(op, flops, bytes, hw, graphed, ClassEfficiencies::of(hw));
}

double transfer_time(double bytes, bool pinned, const Hardware& hw) {
  if (hw.pcie.bandwidth <= 0)
    throw ConfigError(fmt::format(
        "hardware '{}' has no host link to price a host<->device copy: set pcie = {{bandwidth = "
        "bytes/s per direction, latency = seconds}}",
        hw.name));
  // Alpha-beta over the link (Hockney 1994); PCIe 5.0 x16 is 64 GB/s per direction raw
  // (PCI-SIG PCIe 5.0 specification: 32 GT/s × 16 lanes).
  double t = hw.pcie.latency + bytes / hw.pcie.bandwidth;
  if (!pinned) {
    if (hw.host_copy_bandwidth <= 0)
      throw ConfigError(fmt::format(
          "hardware '{}' has no host_copy_bandwidth to price a copy from pageable memory: set "
          "host_copy_bandwidth (bytes/s one host thread copies) or use pinned_memory",
          hw.name));
    // Pageable memory is staged through a pinned buffer by a host memcpy (NVIDIA, "How to
    // Optimize Data Transfers in CUDA C/C++", developer.nvidia.com/blog); modelled serial.
    t += bytes / hw.host_copy_bandwidth;
  }
  return t;
}

double wire_bytes(Collective c, int group, double payload) {
  const double n = group;
  switch (c) {
    case Collective::all_reduce:
      return 2 * (n - 1) / n * payload;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
      return (n - 1) / n * payload;
    case Collective::send_recv:
      break;
  }
  return payload;
}

namespace {

// Alpha and beta of one message of a collective (before the communication efficiency): the
// fastest link inside a node while the group fits in one, else InfiniBand. nullopt when the
// hardware lists no such link.
struct LinkFigures {
  double latency = 0, bandwidth = 0;
};

std::optional<LinkFigures> collective_link(Collective c, int group, int stride, const Hardware& hw) {
  const Link* intra = nullptr;
  for (const Link* l : {&hw.nvlink, &hw.pcie})
    if (l->bandwidth > 0) {
      intra = l;
      break;
    }
  const Link& ib = hw.infiniband;
  const int local = group_ranks_per_node(group, stride, hw);
  if (local >= group) {
    const Link* link = intra != nullptr ? intra : ib.bandwidth > 0 ? &ib : nullptr;
    if (link == nullptr) return std::nullopt;
    return LinkFigures{link->latency, link->bandwidth};
  }
  // Across nodes each GPU has a NIC of its own (the catalog's assumption), every message waits
  // for the network's latency, and the bytes move at the slower of the intra-node link and
  // what the NICs carry of them (g: the group's ranks on one node, gpus_per_node when the
  // group's ranks are adjacent, 1 when each sits on a node of its own):
  // - ring collectives run one ring per NIC, so a node's share of every ring leaves through the
  //   g NICs of the group's ranks together;
  // - all-to-all sends (n - g)/n of the buffer off the node through each rank's own NIC, out of
  //   the (n - 1)/n it sends in all;
  // - send/recv between ring neighbours: the ranks at a node's edge send it all over one NIC.
  if (!(ib.bandwidth > 0)) return std::nullopt;
  const double n = group, g = local;
  double bandwidth = ib.bandwidth;
  if (c == Collective::all_reduce || c == Collective::all_gather || c == Collective::reduce_scatter)
    bandwidth = g * ib.bandwidth;
  else if (c == Collective::all_to_all)
    bandwidth = ib.bandwidth * (n - 1) / (n - g);
  if (intra != nullptr && local > 1) bandwidth = std::min(bandwidth, intra->bandwidth);
  return LinkFigures{ib.latency, bandwidth};
}

}  // namespace

int group_ranks_per_node(int group, int stride, const Hardware& hw) {
  if (hw.gpus_per_node <= 0) return group;
  const int span = std::max(1, stride);
  if (span >= hw.gpus_per_node) return 1;
  return std::clamp(hw.gpus_per_node / span, 1, group);
}

std::optional<FittedCollective> fitted_collective(Collective c, int group, const Hardware& hw) {
  const auto& fits = hw.calibration.collectives;
  if (const auto own = fits.find({c, group}); own != fits.end()) return FittedCollective{&own->second, group};
  // Another group's fit describes the same links only while both groups stay inside one node.
  const auto in_node = [&](int n) { return hw.gpus_per_node <= 0 || n <= hw.gpus_per_node; };
  if (group <= 1 || !in_node(group)) return std::nullopt;
  std::optional<FittedCollective> below, above;
  for (const auto& [key, fit] : fits) {
    const auto& [collective, n] = key;
    if (collective != c || n <= 1 || !in_node(n)) continue;
    if (n < group && (!below || n > below->group)) below = FittedCollective{&fit, n};
    if (n > group && (!above || n < above->group)) above = FittedCollective{&fit, n};
  }
  return below ? below : above;
}

std::optional<double> collective_time(Collective c, int group, double payload, const Hardware& hw, int stride) {
  const std::optional<CollectivePrice> p = price_collective(c, group, payload, hw, stride);
  if (!p) return std::nullopt;
  return p->seconds;
}

std::optional<CollectivePrice> price_collective(Collective c, int group, double payload, const Hardware& hw,
                                                int stride) {
  if (group <= 1) return CollectivePrice{0.0, false};
  const bool one_node = group_ranks_per_node(group, stride, hw) >= group;
  // Ring algorithms (Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009): each rank sends
  // (n-1)/n of the buffer per phase; all-reduce is a reduce-scatter followed by an all-gather.
  const double wire = wire_bytes(c, group, payload);
  // A fitted alpha-beta replaces the link figures: this group's, else the nearest fitted group's
  // at the payload whose ring sends as many bytes per rank over that group.
  const std::optional<FittedCollective> f =
      one_node ? fitted_collective(c, group, hw) : std::optional<FittedCollective>{};
  if (f) {
    const double equal_wire_payload = f->group == group ? payload : wire / wire_bytes(c, f->group, 1.0);
    return CollectivePrice{f->fit->time(equal_wire_payload, wire), true};
  }
  const std::optional<LinkFigures> link = collective_link(c, group, stride, hw);
  if (!link) return std::nullopt;
  const double n = group;
  const double messages = c == Collective::all_reduce ? 2 * (n - 1) : c == Collective::send_recv ? 1 : n - 1;
  const double eff = hw.memory_eff(OpClass::communication);
  if (eff <= 0)
    throw ConfigError(fmt::format("hardware '{}': communication efficiency must be > 0", hw.name));
  // Alpha-beta model (Hockney 1994): latency per message plus bytes over link bandwidth.
  const double ring = messages * link->latency + wire / (link->bandwidth * eff);
  if (c != Collective::all_reduce || one_node) return CollectivePrice{ring, false};
  // Across nodes NCCL also runs all-reduce as a tree (double binary trees between nodes, a chain
  // inside each: Sanders, Speck & Träff 2009; NCCL 2.4) and takes the faster. The payload goes
  // up the tree reduced and down it broadcast, through the g NICs of a node's ranks: 2·payload
  // per node over g NICs; the latency grows with the trees' depth, log2 of the nodes, plus the
  // chain's g − 1 hops each way inside a node.
  const int local = group_ranks_per_node(group, stride, hw);
  const double nodes = std::ceil(n / local);
  const Link* intra = hw.nvlink.bandwidth > 0 ? &hw.nvlink : hw.pcie.bandwidth > 0 ? &hw.pcie : nullptr;
  const double intra_latency = intra != nullptr ? intra->latency : 0.0;
  const double tree = 2 * (std::ceil(std::log2(nodes)) * hw.infiniband.latency + (local - 1) * intra_latency) +
                      2 * payload / (local * hw.infiniband.bandwidth * eff);
  return CollectivePrice{std::min(ring, tree), false};
}

}  // namespace perfsim
