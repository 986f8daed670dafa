// Interpolation in the fitted efficiency tables. Kernel curves are interpolated in log-log
// space (efficiencies and sizes span decades; a straight line there is a power law between two
// points); GEMM grids blend reciprocal efficiencies linearly in 1/size (GemmTable::at).
#include "core/cost/calibration.hpp"
#include "core/kernel_fingerprint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/cost/kernel_paths.hpp"

namespace perfsim {

namespace {

// Position of x on an ascending axis: the lower index and the weight of the upper one,
// clamped to the ends (weight 0 at or below the first point, 1 past the last). The weight is
// linear in log x, or in 1/x (reciprocal).
struct AxisPosition {
  std::size_t lower = 0;
  double weight = 0;
};

enum class AxisScale { log, reciprocal };

AxisPosition locate(const std::vector<double>& axis, double x, AxisScale scale) {
  if (axis.size() == 1 || x <= axis.front()) return {0, 0.0};
  if (x >= axis.back()) return {axis.size() - 2, 1.0};
  const auto upper = static_cast<std::size_t>(
      std::upper_bound(axis.begin(), axis.end(), x) - axis.begin());
  const std::size_t lower = upper - 1;
  const double lo = axis[lower], hi = axis[upper];
  const double w = scale == AxisScale::log ? std::log(x / lo) / std::log(hi / lo)
                                           : (1.0 / lo - 1.0 / x) / (1.0 / lo - 1.0 / hi);
  return {lower, w};
}

void check_axis(const std::vector<double>& axis, const char* what) {
  if (axis.empty()) throw std::logic_error(fmt::format("calibration: empty {} axis", what));
  for (std::size_t i = 0; i < axis.size(); ++i) {
    if (!(axis[i] > 0))
      throw std::logic_error(fmt::format("calibration: {} axis holds {} (must be > 0)", what, axis[i]));
    if (i > 0 && !(axis[i] > axis[i - 1]))
      throw std::logic_error(fmt::format("calibration: {} axis is not ascending", what));
  }
}

}  // namespace

double EfficiencyCurve::at(double roofline_seconds) const {
  check_axis(seconds, "seconds");
  if (efficiency.size() != seconds.size())
    throw std::logic_error(fmt::format("calibration: {} efficiencies for {} points",
                                       efficiency.size(), seconds.size()));
  const AxisPosition p = locate(seconds, roofline_seconds, AxisScale::log);
  if (seconds.size() == 1) return efficiency[0];
  const double lo = efficiency[p.lower], hi = efficiency[p.lower + 1];
  return std::exp(std::log(lo) + p.weight * (std::log(hi) - std::log(lo)));
}

double CollectiveFit::time(double payload_bytes, double wire) const {
  if (payload.empty()) return latency + wire / bandwidth;
  check_axis(payload, "collective payload");
  if (seconds.size() != payload.size() || payload.size() < 2)
    throw std::logic_error(fmt::format("calibration: a collective needs 2 or more payloads with a time each, has {} "
                                       "payloads and {} times",
                                       payload.size(), seconds.size()));
  if (payload_bytes <= payload.front()) return seconds.front();
  // The range holding the payload, or the last one beyond it; time is linear in bytes there.
  std::size_t upper = static_cast<std::size_t>(std::upper_bound(payload.begin(), payload.end(), payload_bytes) -
                                               payload.begin());
  upper = std::min(upper, payload.size() - 1);
  const std::size_t lower = upper - 1;
  const double slope = (seconds[upper] - seconds[lower]) / (payload[upper] - payload[lower]);
  return seconds[lower] + slope * (payload_bytes - payload[lower]);
}

double GemmTable::at(double m_rows, double n_cols, double k_depth) const {
  check_axis(m, "m");
  check_axis(n, "n");
  check_axis(k, "k");
  if (efficiency.size() != m.size() * n.size() * k.size())
    throw std::logic_error(fmt::format("calibration: gemm table holds {} values for a {}x{}x{} grid",
                                       efficiency.size(), m.size(), n.size(), k.size()));
  // Along each axis a GEMM's time is close to affine (t = t0 + c·size: a fixed cost, then work
  // in proportion), so its reciprocal efficiency is linear in 1/size: the blend is trilinear in
  // (1/m, 1/n, 1/k) over the eight corners' reciprocal efficiencies (a single-point axis has
  // one). Log-log blending reads a saturating efficiency low between points (up to 20% for
  // fp32 GEMMs between n = 640 and 1280).
  const AxisPosition pm = locate(m, m_rows, AxisScale::reciprocal), pn = locate(n, n_cols, AxisScale::reciprocal),
                     pk = locate(k, k_depth, AxisScale::reciprocal);
  double inverse = 0;
  for (int di = 0; di < 2; ++di) {
    const double wi = di == 0 ? 1 - pm.weight : pm.weight;
    if (wi == 0) continue;
    for (int dj = 0; dj < 2; ++dj) {
      const double wj = dj == 0 ? 1 - pn.weight : pn.weight;
      if (wj == 0) continue;
      for (int dl = 0; dl < 2; ++dl) {
        const double wl = dl == 0 ? 1 - pk.weight : pk.weight;
        if (wl == 0) continue;
        inverse += wi * wj * wl / cell(pm.lower + di, pn.lower + dj, pk.lower + dl);
      }
    }
  }
  return 1.0 / inverse;
}

std::string kernels_freshness(const Provenance& p) {
  if (p.kernels.empty()) return {};
  const std::string_view today = kernel_fingerprint(p.backend);
  if (today.empty() || today == p.kernels) return {};
  return fmt::format("its {} kernels ({}) are not this build's ({}): recalibrate to price today's kernels",
                     p.backend, p.kernels, today);
}

std::string calibration_key(OpKind kind, DType dtype, bool compute_bound, std::string_view variant) {
  // By family: a paged or varlen kind's layout is its variant ("paged"), as profiles name it.
  return fmt::format("{}/{}/{}{}{}", name_of(calibration_family(kind)), name_of(dtype),
                     compute_bound ? "compute" : "memory", variant.empty() ? "" : "/", variant);
}

bool is_decode_attention(OpKind kind, int64_t seq_q) {
  return class_of(kind) == OpClass::attention && seq_q > 0 && seq_q <= decode_query_rows;
}

namespace {

// Whether the rows of A, B and C (their leading dimensions) span a multiple of 16 bytes.
struct RowAlignment {
  bool a = true, b = true, c = true;
};

RowAlignment row_alignment(const Op& op) {
  const OpAttrs& a = op.attrs;
  const double row_bytes = bytes_of(op.dtype);
  auto aligned = [&](int64_t elements) {
    const double b = static_cast<double>(elements) * row_bytes;
    return std::fmod(b, 16.0) == 0.0;
  };
  return {aligned(a.trans_a ? a.m : a.k), aligned(a.trans_b ? a.k : a.n), aligned(a.n)};
}

}  // namespace

bool gemm_rows_aligned(const Op& op) {
  const RowAlignment r = row_alignment(op);
  return r.a && r.b && r.c;
}

std::string gemm_layout_variant(const Op& op) {
  if (op.kind != OpKind::gemm) return {};
  const RowAlignment r = row_alignment(op);
  if (r.a && r.b && r.c) return {};
  std::string v = "unaligned_";
  v += op.attrs.trans_a ? 't' : 'n';
  v += op.attrs.trans_b ? 't' : 'n';
  v += '_';
  if (!r.a) v += 'a';
  if (!r.b) v += 'b';
  if (!r.c) v += 'c';
  if (op.attrs.m * std::max<int64_t>(op.attrs.batch, 1) <= skinny_gemm_rows) v += "_skinny";
  return v;
}

std::string decode_rows_variant(const Op& op) {
  const OpAttrs& a = op.attrs;
  if (op.kind != OpKind::flash_attention || !is_decode_attention(op.kind, a.seq_q)) return {};
  const int64_t kv_heads = a.kv_heads > 0 ? a.kv_heads : a.heads;
  const int64_t rows = (kv_heads > 0 ? a.heads / kv_heads : 1) * a.seq_q;
  return rows <= 1 ? "decode_q1" : rows <= 4 ? "decode_q4" : "decode_qn";
}

int64_t batched_gemm_calls(const Op& op) {
  const OpAttrs& a = op.attrs;
  int64_t products = 0;
  switch (op.kind) {
    case OpKind::attn_scores:
    case OpKind::attn_context:
      products = 1;
      break;
    case OpKind::attn_scores_bwd:
    case OpKind::attn_context_bwd:
      products = 2;
      break;
    default:
      return 1;
  }
  const int64_t heads = std::max<int64_t>(a.heads, 1);
  const int64_t kv_heads = a.kv_heads > 0 ? a.kv_heads : heads;
  const int64_t group = std::max<int64_t>(heads / kv_heads, 1);
  return products * std::min(std::max<int64_t>(a.batch, 1) * group, heads);
}

std::string copy_rows_variant(const Op& op) {
  // The varlen slice gathers rows anywhere in the step and paged appends write through a
  // table: neither is one block per sequence.
  const bool row_per_sequence = op.kind == OpKind::slice_last_token || op.kind == OpKind::kv_append;
  return row_per_sequence && op.attrs.batch == 1 ? "contiguous" : "";
}

std::string cross_entropy_variant(const Op& op) {
  if (op.kind != OpKind::cross_entropy || op.attrs.cols <= 0) return {};
  // The launcher's choice (kernels/cross_entropy.cu, limits in kernel_paths.hpp): packs of 16
  // bytes when a row is a whole number of them; rows of few enough packs in registers; else
  // rows small enough in shared memory when the gradient is written (always, in a training
  // step); else two sweeps.
  const int64_t element = static_cast<int64_t>(bytes_of(op.dtype));
  const int64_t per_pack = std::max<int64_t>(16 / std::max<int64_t>(element, 1), 1);
  const bool packed = op.attrs.cols % per_pack == 0;
  const int64_t units = packed ? op.attrs.cols / per_pack : op.attrs.cols;
  std::string v = units <= cross_entropy_register_units                       ? "regs"
                  : op.attrs.cols * element <= cross_entropy_row_cache_bytes ? "smem"
                                                                            : "two_sweeps";
  return packed ? v : v + "_scalar";
}

std::string quantized_rows_variant(const Op& op) {
  if (op.kind != OpKind::gemm || op.attrs.weight_bits <= 0 || op.dtype == DType::int8) return {};
  const int64_t rows = op.attrs.m * std::max<int64_t>(op.attrs.batch, 1);
  if (rows > quantized_fused_rows) return {};
  return fmt::format("int{}w_r{}", op.attrs.weight_bits, quantized_rows_class(rows));
}

std::string varlen_rows_variant(const Op& op) {
  const OpAttrs& a = op.attrs;
  if (op.kind != OpKind::varlen_flash_attention || a.seq_q != 1) return {};
  const int64_t kv_heads = a.kv_heads > 0 ? a.kv_heads : a.heads;
  const int64_t group = kv_heads > 0 ? a.heads / kv_heads : 1;
  return group <= 1 ? "varlen_decode_q1" : group <= 4 ? "varlen_decode_q4" : "varlen_decode_qn";
}

std::string finer_calibration_variant(const Op& op) {
  if (std::string v = varlen_rows_variant(op); !v.empty()) return v;
  if (std::string v = quantized_rows_variant(op); !v.empty()) return v;
  if (op.kind == OpKind::gemm) return gemm_layout_variant(op);
  if (std::string v = copy_rows_variant(op); !v.empty()) return v;
  if (std::string v = cross_entropy_variant(op); !v.empty()) return v;
  return decode_rows_variant(op);
}

std::string fp8_kv_variant(std::string_view variant) {
  return variant.empty() ? std::string("fp8kv") : std::string(variant) + "_fp8kv";
}

bool is_calibration_variant(std::string_view v) {
  if (v == "fp8kv") return true;
  if (constexpr std::string_view fp8 = "_fp8kv"; v.ends_with(fp8)) {
    const std::string_view base = v.substr(0, v.size() - fp8.size());
    if (std::find(calibration_variants.begin(), calibration_variants.end(), base) != calibration_variants.end())
      return true;
    return base == "varlen_decode_q1" || base == "varlen_decode_q4" || base == "varlen_decode_qn";
  }
  if (std::find(calibration_variants.begin(), calibration_variants.end(), v) != calibration_variants.end())
    return true;
  if (v == "decode_q1" || v == "decode_q4" || v == "decode_qn" || v == "contiguous") return true;
  if (v == "varlen_decode_q1" || v == "varlen_decode_q4" || v == "varlen_decode_qn") return true;
  for (std::string_view bits : {"int4w_r", "int8w_r"})
    if (v.starts_with(bits) && (v.substr(bits.size()) == "1" || v.substr(bits.size()) == "2" ||
                                v.substr(bits.size()) == "4" || v.substr(bits.size()) == "8"))
      return true;
  for (std::string_view path : {"regs", "smem", "two_sweeps"})
    if (v == path || (v.starts_with(path) && v.substr(path.size()) == "_scalar")) return true;
  // unaligned_<layout>_<operands>: layout two of n/t, operands a non-empty ordered subset of abc.
  constexpr std::string_view prefix = "unaligned_";
  if (v.size() < prefix.size() + 4 || v.substr(0, prefix.size()) != prefix) return false;
  const std::string_view rest = v.substr(prefix.size());
  auto nt = [](char ch) { return ch == 'n' || ch == 't'; };
  if (!nt(rest[0]) || !nt(rest[1]) || rest[2] != '_') return false;
  std::string_view ops = rest.substr(3);
  constexpr std::string_view skinny = "_skinny";
  if (ops.ends_with(skinny)) ops.remove_suffix(skinny.size());
  for (std::string_view subset : {"a", "b", "c", "ab", "ac", "bc", "abc"})
    if (ops == subset) return true;
  return false;
}

std::string_view calibration_variant(const Op& op) {
  if (op.kind == OpKind::varlen_flash_attention && op.attrs.seq_q == 1) return "varlen_decode";
  if (reads_kv_pages(op.kind)) return "paged";
  return unpaged_calibration_variant(op);
}

std::vector<std::string> curve_variants(const Op& op) {
  std::vector<std::string> bits16{std::string(calibration_variant(op))};
  if (bits16.front() == "varlen_decode") bits16.emplace_back("paged");
  if (reads_kv_pages(op.kind)) bits16.emplace_back(unpaged_calibration_variant(op));
  if (!op.attrs.kv_fp8) return bits16;
  std::vector<std::string> out;
  for (const std::string& v : bits16) out.push_back(fp8_kv_variant(v));
  out.insert(out.end(), bits16.begin(), bits16.end());
  return out;
}

std::string_view unpaged_calibration_variant(const Op& op) {
  // A varlen step's longest query run is seq_q: a decode only when every sequence decodes.
  if (op.kind == OpKind::varlen_flash_attention) return op.attrs.seq_q == 1 ? "decode" : "";
  if (is_decode_attention(op.kind, op.attrs.seq_q)) return "decode";
  if (op.kind == OpKind::gemm && op.attrs.weight_bits > 0 && op.dtype != DType::int8) {
    const bool fused = op.attrs.m * std::max<int64_t>(op.attrs.batch, 1) <= quantized_fused_rows;
    if (op.attrs.weight_bits == 4) return fused ? "int4w" : "int4w_dq";
    return fused ? "int8w" : "int8w_dq";
  }
  if (op.kind == OpKind::gemm && !gemm_rows_aligned(op)) return "unaligned";
  if (op.kind == OpKind::adamw && op.attrs.passes <= 1) return "fused";
  return {};
}

}  // namespace perfsim
