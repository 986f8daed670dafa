// Ring attention's online-softmax correction on the GPU (see attn_merge in flash_attention.cuh):
// one thread per output element; the threads of a (sequence, row, head) recompute its two
// weights from the LSEs (cheaper than a second pass), and the first of them writes the LSE.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_device.cuh"
#include "backends/cuda/kernels/flash_attention.cuh"

namespace perfsim::cuda {

using namespace attn_detail;

namespace {

template <class T>
__global__ void attn_merge_kernel(const T* __restrict__ o_a, const float* __restrict__ lse_a,
                                  const T* __restrict__ o_b, const float* __restrict__ lse_b, T* __restrict__ o,
                                  float* __restrict__ lse, int64_t n, int seq_q, int heads, int d) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int x = int(e % d);
    const int64_t row = e / d;  // (b·seq_q + i)·H + h
    const int h = int(row % heads);
    const int64_t bi = row / heads, b = bi / seq_q, i = bi % seq_q;
    const int64_t l = (b * heads + h) * seq_q + i;  // LSE [b, H, seq_q]
    const float la = lse_a[l], lb = lse_b[l];
    const float m = fmaxf(la, lb);
    if (m == -INFINITY) {  // neither block saw a key of this row
      o[e] = from_float<T>(0.f);
      if (x == 0) lse[l] = -INFINITY;
      continue;
    }
    const float ea = expf(la - m), eb = expf(lb - m), sum = ea + eb;
    o[e] = from_float<T>(ea / sum * to_float(o_a[e]) + eb / sum * to_float(o_b[e]));
    if (x == 0) lse[l] = m + logf(sum);
  }
}

}  // namespace

template <class T>
void attn_merge(const T* o_a, const float* lse_a, const T* o_b, const float* lse_b, T* o, float* lse,
                const AttnShape& a, cudaStream_t stream) {
  const int64_t n = a.batch * a.seq_q * a.heads * a.head_dim;
  if (n <= 0) return;
  constexpr int threads = 256;
  attn_merge_kernel<T><<<detail::grid_for(n, threads), threads, 0, stream>>>(
      o_a, lse_a, o_b, lse_b, o, lse, n, int(a.seq_q), int(a.heads), int(a.head_dim));
  PERFSIM_CUDA_CHECK_LAUNCH();
}

#define PERFSIM_CUDA_INSTANTIATE_MERGE(T) \
  template void attn_merge<T>(const T*, const float*, const T*, const float*, T*, float*, const AttnShape&, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_MERGE(float)
PERFSIM_CUDA_INSTANTIATE_MERGE(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_MERGE(__half)

}  // namespace perfsim::cuda
