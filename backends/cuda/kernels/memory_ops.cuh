// Data movement on the GPU, mirroring cpu::kv_append/slice_last_token/copy_tensor
// (backends/cpu/cpu_kernels.hpp), plus the fp8 (e4m3) quantization of the fp8 GEMM path.
// Strided copies are cudaMemcpy2DAsync device-to-device (capturable as memcpy nodes);
// conversions and the quantization are kernels. All asynchronous on `stream`.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cuda {

// The three appends write a cache of C: T (copies), or __nv_fp8_e4m3 for an fp8 cache (the
// fp8_kv pass: kv.fp8, each element stored as e4m3(x / kv.scale), round to nearest-even,
// saturated to ±448; one quantizing kernel, a block per new row). Throws std::logic_error when
// kv (s.kv) does not say C.
//
// k_new [batch, seq_new, row] into cache [batch, capacity, row] at rows position.. (throws
// std::out_of_range on the host when the rows do not fit, as the CPU kernel does): a strided
// copy.
template <class T, class C> void kv_append(const T* k_new, C* cache, const ops::KvAppendShape& s,
                                           cudaStream_t stream);
// k_new [batch, seq_new, row] into pages [num_blocks, block, row] through block_table
// [batch, max_blocks] (cpu::paged_kv_append): one kernel, a block per new row. A table entry
// outside the pool skips its row on the device (the host throws for rows past the table).
template <class T, class C> void paged_kv_append(const T* k_new, C* pages, const int32_t* block_table,
                                                 const ops::KvAppendShape& s, const ops::PagedLayout& p,
                                                 cudaStream_t stream);
// x [batch·seq, cols] -> y [batch, cols]: each sequence's last row.
template <class T> void slice_last_token(const T* x, T* y, int64_t batch, int64_t seq, int64_t cols,
                                         cudaStream_t stream);
// Varlen (a serving engine's packed step), as cpu::kv_append_slots and cpu::gather_rows: row t
// of k_new [tokens, row] into pool row slots[t] of pages [pool_rows, row] (−1 skipped), and
// y[i] = x[rows[i]] for x [x_rows, cols], y [n, cols]. Indices are int32 on the device, checked
// on the host; the kernels skip one outside the pool or x rather than write past it.
template <class T, class C> void kv_append_slots(const T* k_new, C* pages, const int32_t* slots, int64_t tokens,
                                                 int64_t row, int64_t pool_rows, cudaStream_t stream,
                                                 const ops::KvStorage& kv = {});
template <class T> void gather_rows(const T* x, const int32_t* rows, T* y, int64_t n, int64_t x_rows,
                                    int64_t cols, cudaStream_t stream);
// y = x for n elements, converting between float storages (f32, bf16, f16; round to
// nearest-even when narrowing). Same storage: a device-to-device memcpy.
void copy_tensor(const void* x, host::Storage x_type, void* y, host::Storage y_type, int64_t n,
                 cudaStream_t stream);

// Largest finite e4m3 magnitude (OCP FP8 spec: S.1111.110 = 448).
inline constexpr float fp8_e4m3_max = 448.0f;
// Per-tensor fp8 quantization: amax = max|x| (reduction kernel), then y = e4m3(x · 448/amax)
// (cast kernel, saturating) and *scale = amax/448, the dequantization scale a scaled GEMM
// multiplies by (scale = 1 when x is all zeros). x [n], y [n], scale [1] device;
// workspace: 1 float of device memory.
template <class T> void fp8_quantize(const T* x, __nv_fp8_e4m3* y, float* scale, int64_t n,
                                     float* workspace, cudaStream_t stream);

}  // namespace perfsim::cuda
