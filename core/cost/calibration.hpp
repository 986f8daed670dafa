// Efficiency tables fitted from measured runs (`perfsim calibrate`) and the lookups the cost
// model prices ops with. A profile without them (an empty Calibration) is priced from the
// datasheet peaks and the per-class efficiencies alone.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/graph/graph.hpp"
#include "core/graph/op_kind.hpp"
#include "core/config/dtype.hpp"

namespace perfsim {

// Efficiency of one kind of kernel as a function of its roofline time: the time the op would
// take at the profile's datasheet peaks, max(flops / peak, bytes / bandwidth). Small kernels
// reach a smaller fraction of the roofline than large ones; the curve records by how much.
struct EfficiencyCurve {
  std::vector<double> seconds;     // ascending roofline times of the measured points
  std::vector<double> efficiency;  // roofline time / measured kernel time at each point
  // Piecewise linear in (log seconds, log efficiency), held at the end values outside the
  // measured range. Throws std::logic_error on an empty or malformed curve.
  [[nodiscard]] double at(double roofline_seconds) const;
};

// GEMM efficiency over a grid of (m, n, k) for one dtype; m counts every row of a batched
// product (batch × m). Efficiency = roofline time / measured kernel time.
struct GemmTable {
  std::vector<double> m, n, k;     // ascending grid axes
  std::vector<double> efficiency;  // m.size() × n.size() × k.size(), index (i·|n| + j)·|k| + l
  // 1/efficiency blended trilinearly in (1/m, 1/n, 1/k), each coordinate clamped to its axis
  // (calibration.cpp says why). Throws std::logic_error when the table's size does not match its axes.
  [[nodiscard]] double at(double m_rows, double n_cols, double k_depth) const;
  [[nodiscard]] double& cell(std::size_t i, std::size_t j, std::size_t l) {
    return efficiency[(i * n.size() + j) * k.size() + l];
  }
  [[nodiscard]] double cell(std::size_t i, std::size_t j, std::size_t l) const {
    return efficiency[(i * n.size() + j) * k.size() + l];
  }
};

// One collective over one group size. Calibrated, it holds the seconds measured at each payload
// (the collective_time() payload, the nccl-tests size), non-decreasing: between two payloads
// the time is the line through them, an alpha-beta of that size range (protocols and bus
// bandwidth change with size, so one line over 8 KiB..1 GiB misses the middle); below the
// smallest payload, its time (the latency floor); above the largest, the last range's line.
// Written by hand it may be one line for every size instead: latency + wire bytes / bandwidth,
// with the wire bytes of the ring algorithm (roofline.hpp wire_bytes).
struct CollectiveFit {
  double latency = 0;            // seconds per call (alpha) of the one-line form
  double bandwidth = 0;          // wire bytes/s per rank (1 / beta) of the one-line form
  std::vector<double> payload;   // measured payloads, ascending (empty: the one-line form)
  std::vector<double> seconds;   // measured seconds per payload, non-decreasing

  // Seconds for a `payload`-byte buffer whose ring sends `wire` bytes per rank.
  [[nodiscard]] double time(double payload_bytes, double wire) const;
};

// Where and how a profile was measured, printed in reports and written into the profile.
struct Provenance {
  std::string backend;   // "cuda", "cpu"
  std::string device;    // as the device reports its name
  std::string driver;    // driver version ("" on a CPU)
  std::string runtime;   // CUDA runtime version, or the CPU backend's BLAS
  std::string date;      // YYYY-MM-DD
  std::string mode;      // "full" or "quick"
  // How the calibration's ops were timed in its graph mode (Measurement::op_timing: "event
  // nodes", "CUPTI records"); "" where the backend does not say (CPU, older profiles).
  std::string op_timing;
  // The fingerprint of the backend's kernel sources it timed (core/kernel_fingerprint.hpp); ""
  // in profiles that record none. A merge keeps its base calibration's.
  std::string kernels;
};

// "" when a profile timed this build's kernels or records no fingerprint; otherwise one clause
// for report headers saying that they differ and what to do.
[[nodiscard]] std::string kernels_freshness(const Provenance& p);

struct Calibration {
  // key: calibration_key(kind, dtype, bound), e.g. "rmsnorm/bf16/memory".
  std::map<std::string, EfficiencyCurve> kernels;
  std::map<DType, GemmTable> gemm;
  std::map<std::pair<Collective, int>, CollectiveFit> collectives;  // (collective, group size)
  Provenance measured_on;

  [[nodiscard]] bool empty() const {
    return kernels.empty() && gemm.empty() && collectives.empty();
  }
};

// The table key of an op of `kind` computing in `dtype` (the precision it is priced at),
// compute-bound or memory-bound at the datasheet roofline, and its variant (below), e.g.
// "flash_attention/bf16/compute" or "attn_scores/bf16/memory/decode". Keyed by the kind's
// calibration_family: a paged_flash_attention reads "flash_attention/bf16/memory/paged".
[[nodiscard]] std::string calibration_key(OpKind kind, DType dtype, bool compute_bound,
                                          std::string_view variant = {});

// Ops of one kind that run other kernels, or the same kernels far from their design point,
// get curves of their own (an empty variant: none):
//   "decode"    attention over at most decode_query_rows query rows per sequence (a
//               varlen_flash_attention: only when every sequence has one query);
//   "unaligned" a GEMM with a leading dimension that is not a multiple of 16 bytes (an odd
//               vocabulary, say), which rules out the tensor-core kernels that need
//               aligned rows;
//   "fused"     AdamW streaming its tensors once (the multi-tensor kernel), against the
//               per-tensor, multi-pass one;
//   "paged"     the kinds that read KV pages (paged and varlen KV appends and attention);
//               a profile without their curve prices them by the unpaged one;
//   "varlen_decode"  the serving engine's varlen attention when every sequence decodes (one
//               query row each): another kernel than the split-KV decode kernel the "paged"
//               curve times; a profile without its curve prices it by "paged";
//   "int4w", "int8w"  a GEMM on an int4 or int8 weight-only weight (OpAttrs::weight_bits)
//               of at most quantized_fused_rows rows, which dequantizes as it streams the
//               weight; "int4w_dq", "int8w_dq" one of more rows, which dequantizes the weight
//               into a float copy first. A profile without their curves prices them by the
//               float GEMM's grid. W8A8 GEMMs compute in int8: their key's dtype sets them apart.
[[nodiscard]] std::string_view calibration_variant(const Op& op);
// The variant of an op on an fp8 KV cache (OpAttrs::kv_fp8): "fp8kv" after its own,
// "paged_fp8kv", "decode_fp8kv"; its fallback is the 16-bit cache's curve.
[[nodiscard]] std::string fp8_kv_variant(std::string_view variant);
// The variant the op would have with a contiguous cache: its paged curve's fallback.
[[nodiscard]] std::string_view unpaged_calibration_variant(const Op& op);
// The variants whose curves may price the op, best first: its own, then (varlen decode) the
// paged one, then (ops reading pages) the unpaged one; on an fp8 KV cache each of those as
// fp8 ("..._fp8kv") first, then the 16-bit cache's in the same order.
[[nodiscard]] std::vector<std::string> curve_variants(const Op& op);
inline constexpr std::array<std::string_view, 9> calibration_variants = {
    "decode", "unaligned", "fused", "paged", "varlen_decode", "int4w", "int8w", "int4w_dq", "int8w_dq"};
// An unaligned GEMM's finer variant: cuBLAS picks its kernel by the layout and by which
// operands have unaligned rows, so the forward, dgrad and wgrad of one odd-vocabulary lm_head
// run at different speeds. "unaligned_" + the layout (n or t for A, then B) + "_" + the
// unaligned operands among a, b, c: "unaligned_nt_c" for a tied lm_head's forward; with
// "_skinny" appended for at most skinny_gemm_rows rows (a decode step's, a prefill's last
// tokens), which stream the weights through other kernels: the unaligned sweep's memory-bound
// cells of 1 row ran at 0.45-0.79 of their roofline on an H100 (three calibrations, roofline
// times of 5 us and more), those of 16 rows at 0.23-0.45 and of 256 at 0.11-0.18. Empty for every other op. Its curve is read first;
// the pooled "unaligned" curve is the fallback.
inline constexpr int64_t skinny_gemm_rows = 8;
[[nodiscard]] std::string gemm_layout_variant(const Op& op);
// A fused quantized GEMM's finer variant: the kernel is instantiated for 1, 2, 4 or 8 rows of
// A (kernels/quantized_gemm.cu) and streams the same weight bytes at speeds that fall with the
// rows it sums (a decode step of 8 sequences ran its int4 GEMMs at a third of one sequence's
// rate on an H200), so "int4w_r1", "int4w_r2", "int4w_r4", "int4w_r8" (int8w likewise): the
// pooled "int4w" curve is the fallback. Empty for every other op.
[[nodiscard]] std::string quantized_rows_variant(const Op& op);

// Decode attention's finer variant by the query rows that share a K/V row (GQA group × query
// rows): one row runs the CUDA-core split-KV kernel, several the tensor-core kernel with the
// group packed into a 64-row tile (decode_takes_tensor_cores, kernel_paths.hpp), whose rate
// for the same bytes still depends on how much of its tile is used. "decode_q1", "decode_q4"
// (2–4 rows: a Llama-3 decode) or "decode_qn" (more: groups of 5–8, verify passes) for
// flash_attention (a contiguous cache) at decode sizes; empty for every other op. Its curve is
// read first; the pooled "decode" curve is the fallback.
[[nodiscard]] std::string decode_rows_variant(const Op& op);
// A strided copy's finer variant: kv_append (a contiguous cache) and slice_last_token copy
// one block of rows per sequence (a 2-D copy of `batch` rows); with one sequence it is a
// plain contiguous copy, which runs faster for its bytes (an H100 calibration: K and V appends
// moving 10.5 MB over 2 sequences at 0.40-0.53 of their roofline, 6.3 MB over 1 sequence at
// 0.75-1.33, its source still in L2). "contiguous" for one sequence, empty otherwise.
[[nodiscard]] std::string copy_rows_variant(const Op& op);
// Cross-entropy's finer variant: the fused kernel holds a row of logits in registers (up to
// 4096 packs of 16 bytes), copies it into shared memory (up to 110 KiB) or streams it twice,
// with 16-byte packs when the row length allows them, else element by element
// (kernels/cross_entropy.cu); the paths differ in speed for the same bytes (an H100
// calibration: bf16 rows of 32001 logits, element by element in shared memory, at 0.51-0.56
// of their roofline; rows of 65536, streamed twice in packs, at 0.61-0.62). "regs", "smem" or
// "two_sweeps", with "_scalar" appended for the element-by-element loads; empty for every
// other op.
[[nodiscard]] std::string cross_entropy_variant(const Op& op);
// The serving engine's varlen decode attention by query heads per KV head (the GQA group):
// its kernel reads a sequence's K/V once per query head, so at the same KV bytes a group of 4
// or 5 runs at a quarter to a fifth of multi-head attention's rate (an H200: 0.42-0.54 of the
// roofline for groups of 1, 0.16-0.20 for 4, 0.10-0.14 for 5). "varlen_decode_q1" (a group of
// 1), "varlen_decode_q4" (2 to 4), "varlen_decode_qn" (more); empty for every other op.
[[nodiscard]] std::string varlen_rows_variant(const Op& op);
// The variant read before calibration_variant's: varlen_rows_variant, quantized_rows_variant,
// gemm_layout_variant, copy_rows_variant, cross_entropy_variant or decode_rows_variant (on an
// fp8 KV cache only varlen_rows_variant's, as "..._fp8kv").
[[nodiscard]] std::string finer_calibration_variant(const Op& op);
// Whether `variant` is one calibration_variant() or finer_calibration_variant() can return.
[[nodiscard]] bool is_calibration_variant(std::string_view variant);
// The strided-batched GEMM calls one materialized attention product makes (attn_scores,
// attn_context, and each of the two products of their backward): its heads batched per kv
// head for each (sequence, query head of a group), b·g calls, or over the sequences for each
// query head, H calls, whichever is fewer (g = heads / kv_heads). 1 for every other kind.
// Such a kernel's efficiency follows the work of one call, not the op's total: a GQA step of
// many small calls runs well below an MHA step of the same FLOPs in a few large ones.
[[nodiscard]] int64_t batched_gemm_calls(const Op& op);
inline constexpr int64_t decode_query_rows = 16;
[[nodiscard]] bool is_decode_attention(OpKind kind, int64_t seq_q);
// Whether every leading dimension of a GEMM (A: k, or m when trans_a; B: n, or k when trans_b;
// C: n) spans a multiple of 16 bytes of its dtype.
[[nodiscard]] bool gemm_rows_aligned(const Op& op);

}  // namespace perfsim
