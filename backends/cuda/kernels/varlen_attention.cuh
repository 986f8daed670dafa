// Varlen paged attention on the GPU: a serving engine's step, T tokens of S sequences of
// different lengths packed in one tensor (varlen_flash_attention), with exactly the semantics of
// cpu::varlen_flash_attention (cpu_kernels.hpp): Q, O [T, H, d]; LSE [H, T] fp32; K/V pages
// [num_blocks, block, Hkv, d]; table [S, max_blocks]; query_start [S + 1]; kv_len [S]; query i
// of sequence s sees its keys 0 .. kv_len[s] − q_len + i. The int32 metadata lives on the device
// and has been checked on the host: the kernels trust it. T is float, __nv_bfloat16 or __half.
#pragma once
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cuda {

// The decodes (the leading a.decode_seqs one-query sequences) run a split-KV kernel: one CTA per
// (split, kv head, sequence) reading K/V once for the whole GQA group. Its splits merge one of
// two ways:
//  - cluster (no workspace): the splits of a (sequence, kv head) are one thread-block cluster,
//    each takes 1/C of the sequence's keys and they merge in distributed shared memory;
//    C = varlen_decode_splits(a);
//  - workspace (`workspace` holds at least 2 splits' partials): splits of one length for every
//    sequence (vLLM PagedAttention v2), partials in the workspace, merged by a second kernel;
//    longer contexts get more splits (up to 256) than a cluster holds.
// The other sequences run the flash kernel of flash_attention.cu over (query tile, head,
// sequence) with K/V rows read through the table (tensor cores for bf16/fp16 and head_dim 64 or
// 128, else one warp per query row). head_dim 1..256; heads a multiple of kv_heads; sm_90
// (clusters) when there are decodes. The pages are stored as Kv: T, or __nv_fp8_e4m3 for an fp8
// cache (a.kv.fp8, value = stored · a.kv.scale; T bf16 or fp16), read as stored by both parts.
template <class T, class Kv>
void varlen_flash_attention(const T* q, const Kv* k_pages, const Kv* v_pages, const int32_t* table,
                            const int32_t* query_start, const int32_t* kv_len, T* o, float* lse,
                            const ops::VarlenAttnShape& a, cudaStream_t stream, void* workspace = nullptr,
                            int64_t workspace_bytes = 0);

// Cluster size C of the cluster merge: enough CTAs (C × kv heads × decodes) for 4 per SM, no
// split under 64 keys, the longest context cut below 512 keys a split where a cluster allows:
//   clamp(max(min(⌈4·SMs / (decode_seqs·Hkv)⌉, ⌈max_kv / 64⌉), ⌈max_kv / 512⌉), 1, 8).
// 1 when there is no decode or head_dim is not 32, 64, 128 or 256.
[[nodiscard]] int varlen_decode_splits(const ops::VarlenAttnShape& a);
// Workspace bytes of the workspace merge: splits · decode_seqs · H · (head_dim + 2) · 4 with
// splits as above but clamped to 1..256 instead of 1..8; 0 when splits < 2.
[[nodiscard]] int64_t varlen_attention_workspace_bytes(const ops::VarlenAttnShape& a);

namespace detail {

// j / block for 0 ≤ j < 2^31 as a multiply-high, an add and a shift (Granlund & Montgomery 1994,
// the round-up method): a page lookup costs no integer division whatever the block size.
struct PageDivider {
  uint32_t block = 1, magic = 1, shift = 0;
  static PageDivider make(int64_t block) {
    PageDivider d;
    d.block = static_cast<uint32_t>(block);
    while ((uint64_t{1} << d.shift) < d.block) ++d.shift;
    d.magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << d.shift) - d.block)) / d.block + 1);
    return d;
  }
#if defined(__CUDACC__)
  __device__ __forceinline__ int page(int j) const {
    return static_cast<int>((__umulhi(static_cast<uint32_t>(j), magic) + static_cast<uint32_t>(j)) >> shift);
  }
  // The pool row of key j, given its page (the table entry of page(j)).
  __device__ __forceinline__ int64_t row(int entry, int j) const {
    return int64_t(entry) * block + (j - page(j) * int(block));
  }
#endif
};

// Sequences first_seq .. S − 1 of the step through flash attention's kernels (flash_attention.cu).
template <class T, class Kv>
void varlen_flash_prefill(const T* q, const Kv* k_pages, const Kv* v_pages, const int32_t* table,
                          const int32_t* query_start, const int32_t* kv_len, T* o, float* lse,
                          const ops::VarlenAttnShape& a, int64_t first_seq, cudaStream_t stream);
}  // namespace detail

}  // namespace perfsim::cuda
