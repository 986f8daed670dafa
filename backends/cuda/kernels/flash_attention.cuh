// Flash attention on the GPU, forward (flash_attention.cu) and backward
// (flash_attention_bwd.cu), with exactly the semantics of cpu::flash_attention{,_bwd}:
// Q [b, seq_q, H, d]; K, V [b, kv_capacity, Hkv, d] (first seq_kv rows valid); O like Q;
// LSE [b, H, seq_q] fp32 (natural log of the softmax denominator of the scaled scores;
// -inf for a row that sees nothing); GQA h -> h / (H / Hkv); causal with query i at
// position seq_kv - seq_q + i. T is float, __nv_bfloat16 or __half.
#pragma once
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cuda {

using ops::AttnShape;

// Forward. bf16/fp16 with head_dim 64 or 128 run the tensor-core kernel (mma.sync
// m16n8k16, fp32 accumulation); fp32 and other head_dims (<= 256) run a simple per-row
// kernel kept for correctness. block_m picks the query tile of the tensor-core kernel
// (64 or 128 rows; 0 = the default for the head_dim); other values throw ConfigError.
// K and V are stored as Kv: T, or __nv_fp8_e4m3 for an fp8 cache (a.kv.fp8, value = stored ·
// a.kv.scale; T bf16 or fp16), read as stored and widened on chip.
template <class T, class Kv>
void flash_attention(const T* q, const Kv* k, const Kv* v, T* o, float* lse, const AttnShape& a,
                     cudaStream_t stream, int block_m = 0);

// Whether the backward's tensor-core kernel runs a CTA per query head of each GQA group
// (storage of `element_bytes` = 2, head_dim 64 or 128, heads > kv_heads), summing dK/dV into
// fp32 accumulators, rather than a CTA per kv head walking its whole group.
[[nodiscard]] bool flash_bwd_splits_group(const AttnShape& a, int element_bytes);

// Bytes of device workspace flash_attention_bwd needs for elements of `element_bytes`: fp32
// dQ accumulators [b, seq_q, H, d] and D = rowsum(dO ⊙ O) [b, H, seq_q]; where the group
// splits, also fp32 dK and dV accumulators [b, grad_capacity, Hkv, d] (each region 16-byte
// aligned).
[[nodiscard]] int64_t flash_attention_bwd_workspace_bytes(const AttnShape& a, int element_bytes);

// Backward: dQ like Q; dK, dV [b, grad_capacity, Hkv, d] summed over each GQA group,
// rows >= seq_kv written as 0. `workspace` holds flash_attention_bwd_workspace_bytes(a,
// sizeof(T)) bytes (16-byte aligned). See flash_attention_bwd.cu for the kernel split.
// bf16/fp16 with head_dim 64 or 128 run the tensor-core kernel; block_n picks its kv tile
// (64 or 128 rows; 0 = the default; other values throw ConfigError); split_group = false
// keeps one CTA per kv head even where flash_bwd_splits_group (for comparison); the fallback
// ignores both.
template <class T>
void flash_attention_bwd(const T* q, const T* k, const T* v, const T* o, const T* d_o,
                         const float* lse, T* dq, T* dk, T* dv, const AttnShape& a,
                         void* workspace, cudaStream_t stream, int block_n = 0, bool split_group = true);

// Two attention outputs over disjoint keys joined by their LSEs (attention_merge.cu), the
// semantics of cpu::attn_merge: O like Q, LSE [b, H, seq_q] fp32; a row neither saw stays empty.
template <class T>
void attn_merge(const T* o_a, const float* lse_a, const T* o_b, const float* lse_b, T* o, float* lse,
                const AttnShape& a, cudaStream_t stream);

namespace detail {

// Where decode_attention's K/V live: contiguous [b, kv_capacity, Hkv, d] (table null) or pages
// [num_blocks, block_size, Hkv, d] through table [b, max_blocks].
struct DecodePages {
  const int32_t* table = nullptr;
  int block_size = 0, max_blocks = 0;
};

// Whether flash_decode_partials takes a shape: storage of 2 bytes, head_dim 64 or 128, no
// skipped query rows (q_first 0).
[[nodiscard]] bool flash_decode_takes(const AttnShape& a, int element_bytes);

// decode_attention's split-KV partials by the tensor-core flash kernel with the GQA group
// packed: one CTA per (query tile, split, kv head, batch) whose rows are every (head, query) of
// the group, so each K/V row is read once for all of them (decode_attention.cu's CUDA-core
// kernel reads it once per 4 rows). Writes the unnormalized accumulator [splits, b, H, seq_q,
// d] and (max, denominator) [splits, b, H, seq_q, 2], natural-log domain of scaled scores, for
// decode_attention's combine kernel. Splits cover whole 64-key tiles.
template <class T, class Kv>
void flash_decode_partials(const T* q, const Kv* k, const Kv* v, const DecodePages& pages, const AttnShape& a,
                           int splits, float* part_acc, float* part_ml, cudaStream_t stream);

}  // namespace detail

}  // namespace perfsim::cuda
