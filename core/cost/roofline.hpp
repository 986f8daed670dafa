// Pricing one op from its FLOPs and bytes: roofline with per-class efficiencies, the precision
// fallback for dtypes the hardware lacks, launch cost, and alpha-beta collectives.
// cost_model.cpp applies these to every op of a graph.
#pragma once
#include <array>
#include <optional>
#include <string>

#include "core/cost/cost_model.hpp"
#include "core/cost/hardware.hpp"
#include "core/graph/op_kind.hpp"
#include "core/config/dtype.hpp"

namespace perfsim {

inline constexpr std::size_t op_class_count = std::size(all_op_classes);

// The hardware's efficiency tables flattened into arrays, read once per prediction so the
// per-op loop does no map lookups.
struct ClassEfficiencies {
  std::array<double, op_class_count> compute{};
  std::array<double, op_class_count> memory{};
  [[nodiscard]] static ClassEfficiencies of(const Hardware& hw);
};

// The precision an op computing in `t` is priced at: t itself when the hardware has a peak for
// it, else the next wider one (fp8/int8 -> bf16/fp16 -> fp32; tf32 -> fp32). nullopt when the
// hardware has no usable peak at all. int32 is never a compute precision: returns int32.
[[nodiscard]] std::optional<DType> priced_dtype(DType t, const Hardware& hw);

// Where a fitted efficiency curve prices an op (calibration.hpp): the table key of its kind,
// priced dtype and bound, and its roofline time at the datasheet peaks (no efficiencies).
// `perfsim calibrate` fits the curves at these points; the cost model reads them there.
struct CalibrationPoint {
  std::string key;                // "rmsnorm/bf16/memory"
  double roofline_seconds = 0;    // max(flops / peak, bytes / bandwidth)
  bool compute_bound = false;
  // Where the curve is read: the roofline time of one of the op's batched GEMM calls
  // (roofline_seconds / batched_gemm_calls: materialized attention), else roofline_seconds.
  double curve_seconds = 0;
  // Read before `key` when the profile has it: an unaligned GEMM's layout curve
  // ("gemm/bf16/compute/unaligned_nt_c"), decode attention's curve by query rows per K/V row
  // ("flash_attention/bf16/memory/decode_q4"); else empty.
  std::string finer_key;
  // Read when the profile has no curve at `key`: a paged op's unpaged curve
  // ("flash_attention/bf16/memory/decode" for ".../paged"); else empty.
  std::string fallback_key;
};
[[nodiscard]] CalibrationPoint calibration_point(const Op& op, const OpCost& c, const Hardware& hw);

// Roofline cost of `op` doing `flops` and moving `bytes` (per op, not × count):
// max(flops / (peak · compute eff), bytes / (bandwidth · memory eff)) + launch.
// Throws ConfigError when the hardware cannot price it (no bandwidth, no peak).
[[nodiscard]] OpCost roofline_cost(const Op& op, double flops, double bytes, const Hardware& hw,
                                   bool graphed, const ClassEfficiencies& eff);
[[nodiscard]] OpCost roofline_cost(const Op& op, double flops, double bytes, const Hardware& hw,
                                   bool graphed);

// Seconds to move `bytes` across the host link (hw.pcie) one way: latency + bytes / bandwidth
// from pinned memory; from pageable memory the driver first copies through a pinned staging
// buffer on one host thread, modelled serial: + bytes / hw.host_copy_bandwidth. Throws
// ConfigError when the hardware lacks the figure it needs.
[[nodiscard]] double transfer_time(double bytes, bool pinned, const Hardware& hw);

// Bytes one rank sends in a ring collective over `group` ranks of a `payload`-byte buffer:
// 2(n−1)/n for all-reduce, (n−1)/n for all-gather, reduce-scatter and all-to-all, the whole
// payload for send/recv (the wire bytes a CollectiveFit's bandwidth is defined over).
[[nodiscard]] double wire_bytes(Collective c, int group, double payload);

// The calibrated fit that prices collective `c` over `group` ranks: the profile's fit of that
// collective and group size; else, for a group inside one node, the fit of the same collective
// over the nearest fitted group inside the node (the largest below `group`, else the smallest
// above), read at equal bytes per rank (see collective_time). nullopt: no fit applies.
struct FittedCollective {
  const CollectiveFit* fit = nullptr;
  int group = 0;  // the group size the fit was measured over
};
[[nodiscard]] std::optional<FittedCollective> fitted_collective(Collective c, int group, const Hardware& hw);

// Seconds for one collective over `group` ranks moving a `payload`-byte buffer: the fit
// fitted_collective() finds, else alpha-beta (ring algorithms) on the fastest link the hardware
// lists, or on infiniband when the group spans more GPUs than a node (Hardware::gpus_per_node).
// A fit of another group size is read at the payload whose ring sends the same bytes per rank
// over the fitted group: a ring's time follows the bytes each rank sends, which is why
// nccl-tests reports bus bandwidth (algorithm bandwidth × 2(n−1)/n for all-reduce) as the
// figure that holds across group sizes. nullopt when no fit and no such link is described.
// `stride`: the distance between consecutive ranks of the group in the rank order (OpAttrs::
// group_stride); with the GPUs per node it says how many of the group share a node. A group
// whose ranks sit on different nodes crosses the network even when it is small, and a fit
// measured inside one node does not price it.
[[nodiscard]] std::optional<double> collective_time(Collective c, int group, double payload,
                                                    const Hardware& hw, int stride = 1);

// collective_time() with where it came from: `fitted` when a calibrated fit priced it.
struct CollectivePrice {
  double seconds = 0;
  bool fitted = false;
};
[[nodiscard]] std::optional<CollectivePrice> price_collective(Collective c, int group, double payload,
                                                              const Hardware& hw, int stride = 1);
// How many ranks of a group of `group` at `stride` share one node (all of them when the
// hardware does not say how many GPUs a node has).
[[nodiscard]] int group_ranks_per_node(int group, int stride, const Hardware& hw);

}  // namespace perfsim
