// Decode attention (few query rows, long KV cache) by split-KV "flash decoding": the kv
// range is cut into splits computed by separate CTAs, each leaving an unnormalized partial
// (running max, denominator, weighted V sum) in a workspace; a second kernel merges them.
// Same semantics and layouts as flash_attention (flash_attention.cuh): Q [b, seq_q, H, d],
// O like Q, LSE [b, H, seq_q]; GQA; causal with query i at position seq_kv - seq_q + i.
// K and V are stored as Kv: T, or __nv_fp8_e4m3 for an fp8 cache (a.kv.fp8, value = stored ·
// a.kv.scale; T bf16 or fp16), read as stored and widened in registers.
#pragma once
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/ops/kernel_shapes.hpp"
#include "core/cost/kernel_paths.hpp"

namespace perfsim::cuda {

using ops::AttnShape;

// Which kernel computes the splits' partials. automatic: decode_takes_tensor_cores
// (core/cost/kernel_paths.hpp, the rule the cost model prices) picks the tensor-core flash
// kernel with the GQA group packed (flash_decode_partials) for several query rows a KV head (a
// GQA group, a verify pass), else the CUDA-core kernel. The others force one (benchmarks and
// tests compare them; tensor_cores needs bf16/fp16 and head_dim 64 or 128).
enum class DecodeKernel { automatic, cuda_cores, tensor_cores };

// Number of kv splits the launchers use for a shape: enough CTAs (splits × kv heads × batch)
// for 4 per SM of the current device, each split at least 64 kv positions, at most 256 splits.
[[nodiscard]] int decode_attention_splits(const AttnShape& a);
// Bytes of workspace the decode launchers need (fp32 partials for every split).
[[nodiscard]] int64_t decode_attention_workspace_bytes(const AttnShape& a);

// Contiguous cache: K, V [b, kv_capacity, Hkv, d]. head_dim 32, 64, 128 or 256 runs the
// split-KV kernel; other head_dims fall back to flash_attention (no workspace used).
template <class T, class Kv>
void decode_attention(const T* q, const Kv* k, const Kv* v, T* o, float* lse, const AttnShape& a,
                      void* workspace, cudaStream_t stream, DecodeKernel kernel = DecodeKernel::automatic);

// Paged cache: K, V pages [num_blocks, block_size, Hkv, d]; block_table int32
// [b, max_blocks] maps kv position j of batch b to page block_table[b][j / block_size],
// row j % block_size. a.kv_capacity is ignored. head_dim must be 32, 64, 128 or 256.
template <class T, class Kv>
void paged_decode_attention(const T* q, const Kv* k_pages, const Kv* v_pages,
                            const int32_t* block_table, int block_size, int max_blocks, T* o,
                            float* lse, const AttnShape& a, void* workspace, cudaStream_t stream,
                            DecodeKernel kernel = DecodeKernel::automatic);

}  // namespace perfsim::cuda
