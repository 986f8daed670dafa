// Closed-form formulas from the literature. Tests check them by hand and check that the
// graph builders and memory model agree with them.
#pragma once
#include <cstdint>

#include "core/config/dtype.hpp"
#include "core/config/model.hpp"

namespace perfsim::formulas {

// KV cache bytes: 2 (K and V) · layers · batch · seq · kv_heads · head_dim · bytes.
[[nodiscard]] double kv_cache_bytes(const ModelConfig& m, int64_t batch, int64_t seq, DType t);
// Static training bytes per parameter with AdamW: weights + grads + master + m + v.
// bf16 mixed precision: 2 + 2 + 4 + 4 + 4 = 16 (ZeRO, Rajbhandari et al. 2020 §3.1).
[[nodiscard]] double train_static_bytes_per_param(DType compute, bool master_weights);
// Megatron training FLOPs per iteration (Narayanan et al. 2021, §5.1), GPT layers (ffn = 4h):
// 72·B·s·l·h²·(1 + s/(6h) + V/(12lh)) without recompute (3 passes: fwd + 2× bwd);
// 96·B·s·l·h²·(1 + s/(6h) + V/(16lh)) with full recompute (layers run forward twice).
[[nodiscard]] double megatron_train_flops(const ModelConfig& m, int64_t batch, int64_t seq,
                                          bool recompute);
// Decode FLOPs for one token per sequence: 2 per parameter (Kaplan et al. 2020, Table 1, with
// the de-embedding; the embedding lookup is free) + attention 4·layers·context·hidden, QK^T and
// PV (the forward third of PaLM's 12·L·H·Q·T, Chowdhery et al. 2022, App. B; Kaplan's table
// counts only QK^T).
[[nodiscard]] double decode_flops_per_token(const ModelConfig& m, int64_t context);
// Bytes each rank sends in a ring all-reduce of `bytes`: 2(N−1)/N · bytes (Patarasuk & Yuan 2009).
[[nodiscard]] double ring_allreduce_bytes(double bytes, int ranks);
// Bytes each rank sends in a ring all-gather or reduce-scatter of a `bytes` buffer (the whole
// gathered buffer, the one before scattering): (N−1)/N · bytes (Patarasuk & Yuan 2009; the
// volumes nccl-tests' bus bandwidth is defined over).
[[nodiscard]] double ring_allgather_bytes(double bytes, int ranks);

// ZeRO (Rajbhandari et al. 2020, §5.1 and Figure 1): bytes of model states per GPU for
// `params` parameters over `dp` data-parallel ranks, mixed-precision Adam with K bytes of
// optimizer state per parameter (K = 12: fp32 master weights, m and v). Stage 0, the baseline:
// (2 + 2 + K)Ψ; 1 (P_os): 2Ψ + 2Ψ + KΨ/N_d; 2 (P_os+g): 2Ψ + (2 + K)Ψ/N_d; 3 (P_os+g+p):
// (2 + 2 + K)Ψ/N_d.
[[nodiscard]] double zero_model_state_bytes(double params, int dp, int stage, double k = 12);

// Megatron tensor parallelism (Shoeybi et al. 2019, §3, Figure 4): each transformer layer
// all-reduces its b·s·h activations twice in the forward (after attention and after the MLP)
// and twice in the backward. Bytes each of the `tp` ranks sends per layer per pass, activations
// of `element_bytes`. With sequence parallelism each all-reduce becomes a reduce-scatter and an
// all-gather of the same buffer, the same bytes (Korthikanti et al. 2022, §4.2.2).
[[nodiscard]] double tp_layer_bytes_per_pass(int64_t batch, int64_t seq, int64_t hidden, int tp,
                                             double element_bytes);

// Activation memory of one transformer layer in bytes, 16-bit activations with dropout masks
// (Korthikanti et al. 2022, "Reducing Activation Recomputation", §4 and Table 2):
//   no parallelism                 s·b·h·(34 + 5·a·s/h)
//   tensor parallel (t)            s·b·h·(10 + 24/t + 5·a·s/(h·t))
//   tensor + sequence parallel     s·b·h·(34 + 5·a·s/h)/t
//   tensor parallel, selective     s·b·h·(10 + 24/t)      (attention's a·s² terms recomputed)
//   tensor + sequence, selective   s·b·h·34/t
//   full recompute                 2·s·b·h                (the layer input only)
enum class ActivationRecompute { none, selective, full };
[[nodiscard]] double megatron_layer_activation_bytes(int64_t seq, int64_t batch, int64_t hidden,
                                                     int64_t heads, int tp, bool sequence_parallel,
                                                     ActivationRecompute recompute);

// Pipeline bubble (Narayanan et al. 2021, §2.2): with p stages and m micro-batches, GPipe and
// 1F1B idle (p − 1) of the m + p − 1 slots of a stage, so the bubble is (p − 1)/(m + p − 1) of
// the step; compute uniform and communication free.
[[nodiscard]] double pipeline_bubble_fraction(int stages, int micro_batches);
// Interleaved 1F1B with v model chunks per stage (§2.2.2): bubble time over ideal compute time,
// (p − 1)/(v·m).
[[nodiscard]] double interleaved_bubble_ratio(int stages, int micro_batches, int chunks);

// Roofline: arithmetic intensity where compute time equals memory time (Williams et al. 2009).
[[nodiscard]] double ridge_point(double peak_flops, double bandwidth);

}  // namespace perfsim::formulas
