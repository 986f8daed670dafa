// Closed-form reference formulas (see formulas.hpp for the sources of each).
#include "core/cost/formulas.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace perfsim::formulas {

namespace {
double d(int64_t v) { return static_cast<double>(v); }
}  // namespace

double kv_cache_bytes(const ModelConfig& m, int64_t batch, int64_t seq, DType t) {
  // K and V, every layer, every cached position: 2·L·B·s·kv_heads·head_dim·bytes.
  return 2.0 * d(m.layers) * d(batch) * d(seq) * d(m.kv_heads_or_heads()) * d(m.head_dim()) *
         bytes_of(t);
}

double train_static_bytes_per_param(DType compute, bool master_weights) {
  // Weights and gradients in the compute format, AdamW m and v in fp32 (4 + 4), plus an
  // fp32 master copy under mixed precision (Rajbhandari et al. 2020, ZeRO §3.1).
  const double w = bytes_of(compute);
  return w + w + 8.0 + (master_weights ? 4.0 : 0.0);
}

double megatron_train_flops(const ModelConfig& m, int64_t batch, int64_t seq, bool recompute) {
  // Narayanan et al. 2021 (Megatron-LM at scale), §5.1, eq. for F with ffn = 4h.
  const double b = d(batch), s = d(seq), l = d(m.layers), h = d(m.hidden), v = d(m.vocab);
  if (recompute) return 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
  return 72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h));
}

double decode_flops_per_token(const ModelConfig& m, int64_t context) {
  // 2 FLOPs per parameter (Kaplan et al. 2020, Table 1): every layer parameter (norm gains
  // included, as "2·params" counts them), the lm_head and the final norm; the embedding lookup
  // is free. Attention: QK^T and PV, 2·context·hidden each per layer (Chowdhery et al. 2022,
  // PaLM App. B).
  const double h = d(m.hidden), final_norm = m.norm == NormKind::layernorm ? 2.0 * h : h;
  const double matmul_params = d(m.layers) * d(m.layer_params()) + d(m.vocab) * h + final_norm;
  return 2.0 * matmul_params + 4.0 * d(m.layers) * d(context) * h;
}

double ring_allreduce_bytes(double bytes, int ranks) {
  if (ranks < 1) throw ConfigError(fmt::format("all-reduce needs at least 1 rank (got {})", ranks));
  // Reduce-scatter then all-gather, each moving (N−1)/N of the buffer (Patarasuk & Yuan 2009).
  const double n = static_cast<double>(ranks);
  return 2.0 * (n - 1.0) / n * bytes;
}

double ring_allgather_bytes(double bytes, int ranks) {
  if (ranks < 1) throw ConfigError(fmt::format("all-gather needs at least 1 rank (got {})", ranks));
  const double n = static_cast<double>(ranks);
  return (n - 1.0) / n * bytes;
}

double zero_model_state_bytes(double params, int dp, int stage, double k) {
  if (dp < 1) throw ConfigError(fmt::format("ZeRO needs at least 1 data-parallel rank (got {})", dp));
  if (stage < 0 || stage > 3) throw ConfigError(fmt::format("ZeRO stage must be 0 to 3 (got {})", stage));
  // Rajbhandari et al. 2020, §5.1: weights (2Ψ) and gradients (2Ψ) in fp16, K·Ψ of optimizer
  // state; each stage partitions one more of them over the N_d ranks.
  const double n = static_cast<double>(dp), psi = params;
  switch (stage) {
    case 0: return (2.0 + 2.0 + k) * psi;
    case 1: return 2.0 * psi + 2.0 * psi + k * psi / n;
    case 2: return 2.0 * psi + (2.0 + k) * psi / n;
    default: return (2.0 + 2.0 + k) * psi / n;
  }
}

double tp_layer_bytes_per_pass(int64_t batch, int64_t seq, int64_t hidden, int tp, double element_bytes) {
  // Two all-reduces of the [b·s, h] activations per pass (Shoeybi et al. 2019, Figure 4).
  return 2.0 * ring_allreduce_bytes(d(batch) * d(seq) * d(hidden) * element_bytes, tp);
}

double megatron_layer_activation_bytes(int64_t seq, int64_t batch, int64_t hidden, int64_t heads, int tp,
                                       bool sequence_parallel, ActivationRecompute recompute) {
  if (tp < 1) throw ConfigError(fmt::format("tensor parallelism needs at least 1 rank (got {})", tp));
  // Korthikanti et al. 2022, Table 2 (s·b·h and 5·a·s/h as written there).
  const double s = d(seq), b = d(batch), h = d(hidden), a = d(heads), t = tp;
  const double sbh = s * b * h, scores = 5.0 * a * s / h;
  switch (recompute) {
    case ActivationRecompute::full: return 2.0 * sbh;
    case ActivationRecompute::selective: return sequence_parallel ? sbh * 34.0 / t : sbh * (10.0 + 24.0 / t);
    case ActivationRecompute::none: break;
  }
  if (sequence_parallel) return sbh * (34.0 + scores) / t;
  return sbh * (10.0 + 24.0 / t + scores / t);
}

double pipeline_bubble_fraction(int stages, int micro_batches) {
  if (stages < 1 || micro_batches < 1)
    throw ConfigError(fmt::format("a pipeline needs at least 1 stage and 1 micro-batch (got {} and {})",
                                  stages, micro_batches));
  const double p = stages, m = micro_batches;
  return (p - 1.0) / (m + p - 1.0);
}

double interleaved_bubble_ratio(int stages, int micro_batches, int chunks) {
  if (stages < 1 || micro_batches < 1 || chunks < 1)
    throw ConfigError(fmt::format("an interleaved pipeline needs at least 1 stage, micro-batch and chunk "
                                  "(got {}, {} and {})", stages, micro_batches, chunks));
  const double p = stages, m = micro_batches, v = chunks;
  return (p - 1.0) / (v * m);
}

double ridge_point(double peak_flops, double bandwidth) {
  if (bandwidth <= 0)
    throw ConfigError(fmt::format("ridge point needs a positive memory bandwidth (got {})", bandwidth));
  // Williams, Waterman & Patterson 2009 (Roofline): intensity where both limits meet.
  return peak_flops / bandwidth;
}

}  // namespace perfsim::formulas
