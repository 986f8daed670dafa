// Closed-form formulas from the literature. Tests check them by hand and check that the
// graph builders and memory model agree with them.
#pragma once
#include <cstdint>

#include "core/spec/dtype.hpp"
#include "core/spec/model.hpp"

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
// Roofline: arithmetic intensity where compute time equals memory time (Williams et al. 2009).
[[nodiscard]] double ridge_point(double peak_flops, double bandwidth);

}  // namespace perfsim::formulas
