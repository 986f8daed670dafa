// Flash attention backward (FlashAttention-2, Dao 2023, Alg. 2): dQ, dK, dV from Q, K, V,
// O, dO and the forward's LSE, recomputing P tile by tile (no score matrix in memory).
// Q, O, dO, dQ [b, seq_q, H, d]; K, V [b, kv_capacity, Hkv, d]; dK, dV [b, grad_capacity,
// Hkv, d] (rows >= seq_kv written as 0); LSE [b, H, seq_q]. Semantics of
// cpu::flash_attention_bwd (GQA groups summed into their kv head, causal as the forward).
//
// Three launches:
//  1. preprocess: D = rowsum(dO ⊙ O) per (b, h, i) into the workspace, and the fp32 dQ
//     accumulators (and a split group's dK/dV accumulators) zeroed;
//  2. the main pass: dK/dV per kv tile and dQ by fp32 atomics into the accumulators (so
//     dQ's summation order varies run to run at fp32 rounding level). bf16/fp16 with
//     head_dim 64 or 128 run the tensor-core kernel of flash_attention_bwd_tc.cu, which by
//     default splits a GQA group into a CTA per query head whose dK/dV go to fp32
//     accumulators by atomics (flash_bwd_splits_group); fp32 and other head_dims run the
//     fallback below: one CTA per (kv tile of 16 rows, kv head, batch) holds its K/V tile in
//     shared memory and its dK/dV in registers, walks every query row of every head of its
//     GQA group in chunks of 8 (skipping chunks the causal mask hides entirely), in fp32 on
//     the CUDA cores (correct, not tuned);
//  3. dQ (and a split group's dK, dV) converted from the fp32 accumulators to T.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_device.cuh"
#include "backends/cuda/kernels/flash_attention.cuh"
#include "backends/cuda/kernels/flash_attention_bwd_detail.cuh"
#include "core/cost/kernel_paths.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

using namespace attn_detail;
using flash_bwd_detail::BwdParams;

namespace {

constexpr int k_bc = 16;        // kv rows per CTA
constexpr int k_rows = 8;       // query rows per chunk
constexpr int k_threads = 128;  // == k_rows * k_bc: one (row, kv) score per thread
constexpr int k_max_d = 256;
constexpr int k_max_per_thread = k_bc * k_max_d / k_threads;  // dK/dV elements per thread

__device__ __forceinline__ int visible(const BwdParams& p, int i) {
  if (i < p.q_first) return 0;
  return p.causal ? max(0, min(p.seq_kv, p.seq_kv - p.seq_q + i + 1)) : p.seq_kv;
}

// One warp per (b, i, h) row: D = dO·O, and the row's dQ accumulators zeroed; the threads
// together zero the `dkv_floats` of a split group's dK/dV accumulators.
template <class T>
__global__ void bwd_preprocess_kernel(BwdParams p, int64_t rows, int64_t dkv_floats) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < dkv_floats;
       e += int64_t(gridDim.x) * blockDim.x)
    p.dkv_acc[e] = 0.f;
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;  // r = (b·seq_q + i)·H + h
  const T* o = static_cast<const T*>(p.o) + r * p.d;
  const T* d_o = static_cast<const T*>(p.d_o) + r * p.d;
  float* dq = p.dq_acc + r * p.d;
  float sum = 0.f;
  for (int x = lane; x < p.d; x += 32) {
    sum += to_float(o[x]) * to_float(d_o[x]);
    dq[x] = 0.f;
  }
  sum = warp_sum(sum);
  if (lane == 0) {
    const int64_t h = r % p.heads, bi = r / p.heads;
    const int64_t b = bi / p.seq_q, i = bi % p.seq_q;
    p.delta[(b * p.heads + h) * p.seq_q + i] = sum;
  }
}

template <class T>
__global__ void __launch_bounds__(k_threads) bwd_kv_kernel(BwdParams p) {
  extern __shared__ float smem[];
  const int d = p.d, ds_stride = d + 1;  // +1: the score step reads 16 rows at one column
  float* k_s = smem;                      // [k_bc, d+1]
  float* v_s = k_s + k_bc * ds_stride;    // [k_bc, d+1]
  float* q_s = v_s + k_bc * ds_stride;    // [k_rows, d]
  float* do_s = q_s + k_rows * d;         // [k_rows, d]
  float* p_s = do_s + k_rows * d;         // [k_rows, k_bc]
  float* dsc_s = p_s + k_rows * k_bc;     // [k_rows, k_bc]

  const int tid = threadIdx.x;
  const int j0 = blockIdx.x * k_bc, kh = blockIdx.y, b = blockIdx.z;
  const int64_t kv_stride = int64_t(p.kv_heads) * d, q_stride = int64_t(p.heads) * d;
  const int valid = max(0, min(k_bc, p.seq_kv - j0));

  const T* k = static_cast<const T*>(p.k) + ((int64_t(b) * p.kv_capacity + j0) * p.kv_heads + kh) * d;
  const T* v = static_cast<const T*>(p.v) + ((int64_t(b) * p.kv_capacity + j0) * p.kv_heads + kh) * d;
  for (int e = tid; e < k_bc * d; e += k_threads) {
    const int c = e / d, x = e % d;
    k_s[c * ds_stride + x] = c < valid ? to_float(k[c * kv_stride + x]) : 0.f;
    v_s[c * ds_stride + x] = c < valid ? to_float(v[c * kv_stride + x]) : 0.f;
  }
  float dk_acc[k_max_per_thread], dv_acc[k_max_per_thread];
#pragma unroll
  for (int u = 0; u < k_max_per_thread; ++u) dk_acc[u] = dv_acc[u] = 0.f;
  __syncthreads();

  if (valid > 0) {
    for (int h = kh * p.group; h < (kh + 1) * p.group; ++h) {
      const T* q = static_cast<const T*>(p.q) + (int64_t(b) * p.seq_q * p.heads + h) * d;
      const T* d_o = static_cast<const T*>(p.d_o) + (int64_t(b) * p.seq_q * p.heads + h) * d;
      const float* lse = p.lse + (int64_t(b) * p.heads + h) * p.seq_q;
      const float* delta = p.delta + (int64_t(b) * p.heads + h) * p.seq_q;
      float* dq = p.dq_acc + (int64_t(b) * p.seq_q * p.heads + h) * d;
      for (int i0 = 0; i0 < p.seq_q; i0 += k_rows) {
        const int rows = min(k_rows, p.seq_q - i0);
        if (visible(p, i0 + rows - 1) <= j0) continue;  // the chunk sees none of this tile
        for (int e = tid; e < k_rows * d; e += k_threads) {
          const int r = e / d, x = e % d;
          q_s[e] = r < rows ? to_float(q[(i0 + r) * q_stride + x]) : 0.f;
          do_s[e] = r < rows ? to_float(d_o[(i0 + r) * q_stride + x]) : 0.f;
        }
        __syncthreads();
        {  // P and dS = P ⊙ (dO·V^T − D) for one (row, kv) pair per thread
          const int r = tid / k_bc, c = tid % k_bc;
          float s = 0.f, dp = 0.f;
          for (int x = 0; x < d; ++x) {
            s += q_s[r * d + x] * k_s[c * ds_stride + x];
            dp += do_s[r * d + x] * v_s[c * ds_stride + x];
          }
          const int i = i0 + r;
          const bool seen = r < rows && j0 + c < visible(p, i);
          const float pr = seen ? expf(s * p.scale - lse[i]) : 0.f;
          p_s[r * k_bc + c] = pr;
          dsc_s[r * k_bc + c] = seen ? pr * (dp - delta[i]) : 0.f;
        }
        __syncthreads();
        // dV += P^T·dO, dK += scale·dS^T·Q for this thread's (c, x) elements.
#pragma unroll
        for (int u = 0; u < k_max_per_thread; ++u) {
          const int e = tid + u * k_threads;
          if (e < k_bc * d) {
            const int c = e / d, x = e % d;
            float av = 0.f, ak = 0.f;
#pragma unroll
            for (int r = 0; r < k_rows; ++r) {
              av += p_s[r * k_bc + c] * do_s[r * d + x];
              ak += dsc_s[r * k_bc + c] * q_s[r * d + x];
            }
            dv_acc[u] += av;
            dk_acc[u] += ak * p.scale;
          }
        }
        // dQ += scale·dS·K for this tile's 16 kv rows.
        for (int e = tid; e < rows * d; e += k_threads) {
          const int r = e / d, x = e % d;
          float a = 0.f;
#pragma unroll
          for (int c = 0; c < k_bc; ++c) a += dsc_s[r * k_bc + c] * k_s[c * ds_stride + x];
          if (a != 0.f) atomicAdd(dq + (i0 + r) * q_stride + x, a * p.scale);
        }
        __syncthreads();  // q_s, do_s, p_s, dsc_s are rewritten by the next chunk
      }
    }
  }

  T* dk = static_cast<T*>(p.dk) + ((int64_t(b) * p.grad_capacity + j0) * p.kv_heads + kh) * d;
  T* dv = static_cast<T*>(p.dv) + ((int64_t(b) * p.grad_capacity + j0) * p.kv_heads + kh) * d;
  const int out_rows = int(p.grad_capacity - j0 < k_bc ? p.grad_capacity - j0 : k_bc);
#pragma unroll
  for (int u = 0; u < k_max_per_thread; ++u) {
    const int e = tid + u * k_threads;
    if (e < k_bc * d) {
      const int c = e / d, x = e % d;
      if (c < out_rows) {
        dk[c * kv_stride + x] = from_float<T>(dk_acc[u]);
        dv[c * kv_stride + x] = from_float<T>(dv_acc[u]);
      }
    }
  }
}

// dQ from its n_q accumulators; then, with a split group, dK and dV from theirs (n_kv each).
template <class T>
__global__ void bwd_convert_kernel(const float* dq_acc, T* dq, int64_t n_q, const float* dkv_acc, T* dk, T* dv,
                                   int64_t n_kv) {
  const int64_t n = n_q + 2 * n_kv;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    if (e < n_q) dq[e] = from_float<T>(dq_acc[e]);
    else if (e < n_q + n_kv) dk[e - n_q] = from_float<T>(dkv_acc[e - n_q]);
    else dv[e - n_q - n_kv] = from_float<T>(dkv_acc[e - n_q]);
  }
}

int64_t dq_acc_floats(const AttnShape& a) { return a.batch * a.seq_q * a.heads * a.head_dim; }
int64_t round16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

bool flash_bwd_splits_group(const AttnShape& a, int element_bytes) {
  return flash_bwd_splits_gqa_group(element_bytes, a.head_dim, a.heads, a.kv_heads) && a.grad_capacity > 0;
}

int64_t flash_attention_bwd_workspace_bytes(const AttnShape& a, int element_bytes) {
  const int64_t dq = round16(dq_acc_floats(a) * 4), delta = a.batch * a.heads * a.seq_q * 4;
  if (!flash_bwd_splits_group(a, element_bytes)) return dq + delta;
  return dq + round16(delta) + 2 * a.batch * a.grad_capacity * a.kv_heads * a.head_dim * 4;
}

template <class T>
void flash_attention_bwd(const T* q, const T* k, const T* v, const T* o, const T* d_o,
                         const float* lse, T* dq, T* dk, T* dv, const AttnShape& a,
                         void* workspace, cudaStream_t stream, int block_n, bool split_group) {
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw ConfigError("flash_attention_bwd: heads must be a positive multiple of kv_heads");
  if (a.head_dim <= 0 || a.head_dim > k_max_d)
    throw ConfigError("flash_attention_bwd: head_dim " + std::to_string(a.head_dim) +
                      " unsupported on CUDA (1..256)");
  if (a.seq_kv > a.kv_capacity || a.seq_kv > a.grad_capacity)
    throw ConfigError("flash_attention_bwd: seq_kv exceeds kv_capacity or grad_capacity");
  if (block_n != 0 && block_n != 64 && block_n != 128)
    throw ConfigError("flash_attention_bwd: block_n must be 0, 64 or 128, got " + std::to_string(block_n));
  if (a.batch <= 0) return;
  char* ws = static_cast<char*>(workspace);
  auto* dq_acc = reinterpret_cast<float*>(ws);
  const int64_t dq_bytes = round16(dq_acc_floats(a) * 4), delta_bytes = a.batch * a.heads * a.seq_q * 4;
  auto* delta = reinterpret_cast<float*>(ws + dq_bytes);
  const bool split = split_group && flash_bwd_splits_group(a, int(sizeof(T)));
  auto* dkv_acc = split ? reinterpret_cast<float*>(ws + dq_bytes + round16(delta_bytes)) : nullptr;
  const int64_t n_kv = split ? a.batch * a.grad_capacity * a.kv_heads * a.head_dim : 0;
  BwdParams p{q, k, v, o, d_o, lse, dq, dk, dv, dq_acc, delta, dkv_acc,
              int(a.seq_q), int(a.seq_kv), int(a.heads), int(a.kv_heads), int(a.group()),
              int(a.head_dim), a.kv_capacity, a.grad_capacity, a.causal, a.scale(), int(a.q_first)};

  const int64_t rows = a.batch * a.seq_q * a.heads;
  if (rows > 0 || n_kv > 0) {
    constexpr int warps = 8;
    const int64_t blocks = std::max<int64_t>((rows + warps - 1) / warps, std::min<int64_t>((2 * n_kv + 255) / 256, 4096));
    bwd_preprocess_kernel<T><<<unsigned(blocks), warps * 32, 0, stream>>>(p, rows, 2 * n_kv);
    PERFSIM_CUDA_CHECK_LAUNCH();
  }
  if (a.grad_capacity > 0 && flash_bwd_detail::bwd_tc_supported<T>(int(a.head_dim))) {
    flash_bwd_detail::flash_bwd_tc<T>(p, int(a.batch), block_n, stream);
  } else if (a.grad_capacity > 0) {
    const int d = int(a.head_dim);
    const int smem = int(sizeof(float)) * (2 * k_bc * (d + 1) + 2 * k_rows * d + 2 * k_rows * k_bc);
    PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(bwd_kv_kernel<T>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const dim3 grid(unsigned((a.grad_capacity + k_bc - 1) / k_bc), unsigned(a.kv_heads),
                    unsigned(a.batch));
    bwd_kv_kernel<T><<<grid, k_threads, smem, stream>>>(p);
    PERFSIM_CUDA_CHECK_LAUNCH();
  }
  const int64_t n_q = dq_acc_floats(a), n = n_q + 2 * n_kv;
  if (n > 0) {
    const unsigned blocks = unsigned(std::min<int64_t>((n + 255) / 256, 4096));
    bwd_convert_kernel<T><<<blocks, 256, 0, stream>>>(dq_acc, dq, n_q, dkv_acc, dk, dv, n_kv);
    PERFSIM_CUDA_CHECK_LAUNCH();
  }
}

#define PERFSIM_CUDA_INSTANTIATE_FLASH_BWD(T)                                                   \
  template void flash_attention_bwd<T>(const T*, const T*, const T*, const T*, const T*,         \
                                       const float*, T*, T*, T*, const AttnShape&, void*,       \
                                       cudaStream_t, int, bool);
PERFSIM_CUDA_INSTANTIATE_FLASH_BWD(float)
PERFSIM_CUDA_INSTANTIATE_FLASH_BWD(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_FLASH_BWD(__half)

}  // namespace perfsim::cuda
