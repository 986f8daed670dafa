// The mixture-of-experts router and its backward (shapes in moe.cuh). Forward: a warp per
// token makes k selection sweeps over its logits (a warp arg-max each, ranked as the CPU
// reference ranks them) and lanes 0..k−1 take the softmax of the picks; then a block per
// expert scans the T·k choices in order (ballots and a prefix over the block's warps), so a
// choice's slot is the count of earlier choices of its expert, as in cpu::moe_route.
// Backward: a warp per token recomputes the weights and writes its dlogits row.
#include <climits>
#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/moe.cuh"

namespace perfsim::cuda {

namespace {

constexpr int warps_per_block = 4;  // tokens per block of the warp-per-token kernels
constexpr int scan_threads = 512;   // choices a slot-scan block takes per step

// Whether logit a of expert ai ranks above logit b of expert bi: the larger, the lower expert
// on ties, NaN below every number (cpu_moe.cpp ranks alike).
__device__ __forceinline__ bool ranks_above(float a, int ai, float b, int bi) {
  if (isnan(a) != isnan(b)) return isnan(b);
  if (!isnan(a) && a != b) return a > b;
  return ai < bi;
}

template <class T>
__global__ void route_topk_kernel(const T* __restrict__ logits, float* __restrict__ weights,
                                  int32_t* __restrict__ experts, ops::MoeShape s) {
  const int lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  if (t >= s.tokens) return;  // the whole warp
  const T* row = logits + t * s.experts;
  const int n = static_cast<int>(s.experts), k = static_cast<int>(s.top_k);
  uint64_t picked = 0;  // bit m: expert lane + 32·m is taken
  float pick_v = 0.0f;  // lane j: the j-th pick
  int pick_e = 0;
  for (int j = 0; j < k; ++j) {
    float bv = NAN;  // (NaN, INT_MAX) ranks below every expert
    int bi = INT_MAX;
    for (int m = 0, e = lane; e < n; ++m, e += 32) {
      if ((picked >> m) & 1) continue;
      const float v = detail::to_f32(row[e]);
      if (ranks_above(v, e, bv, bi)) bv = v, bi = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ranks_above(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if (bi % 32 == lane) picked |= uint64_t{1} << (bi / 32);
    if (lane == j) pick_v = bv, pick_e = bi;
  }
  // Softmax over the picks; the first is the largest.
  const float mx = __shfl_sync(0xffffffffu, pick_v, 0);
  const float ex = lane < k ? expf(pick_v - mx) : 0.0f;
  const float sum = detail::warp_sum(ex);
  if (lane < k) {
    weights[t * k + lane] = ex / sum;
    experts[t * k + lane] = pick_e;
  }
}

// Block e: slot = the number of earlier choices of expert e, −1 from capacity on.
__global__ void route_slots_kernel(const int32_t* __restrict__ experts, int32_t* __restrict__ slots,
                                   ops::MoeShape s) {
  __shared__ int warp_counts[scan_threads / 32];
  const int e = static_cast<int>(blockIdx.x);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n = s.tokens * s.top_k;
  int64_t base = 0;  // choices of e before this step
  for (int64_t start = 0; start < n; start += scan_threads) {
    const int64_t i = start + threadIdx.x;
    const bool mine = i < n && experts[i] == e;
    const unsigned ballot = __ballot_sync(0xffffffffu, mine);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = __popc(ballot & ((1u << lane) - 1u)), total = 0;
#pragma unroll
    for (int w = 0; w < scan_threads / 32; ++w) {
      before += w < warp ? warp_counts[w] : 0;
      total += warp_counts[w];
    }
    if (mine) {
      const int64_t slot = base + before;
      slots[i] = slot < s.capacity ? static_cast<int32_t>(slot) : -1;
    }
    base += total;
    __syncthreads();  // warp_counts is rewritten next step
  }
}

template <class T>
__global__ void route_bwd_kernel(const T* __restrict__ logits, const int32_t* __restrict__ experts,
                                 const float* __restrict__ dweights, float* __restrict__ dlogits,
                                 ops::MoeShape s) {
  __shared__ int chosen[warps_per_block][32];
  __shared__ float grad[warps_per_block][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * warps_per_block + warp;
  if (t >= s.tokens) return;  // the whole warp
  const int k = static_cast<int>(s.top_k);
  // Lane j: choice j. An expert out of range is left out of the softmax.
  const int e = lane < k ? experts[t * k + lane] : -1;
  const bool valid = e >= 0 && e < s.experts;
  const float v = valid ? detail::to_f32(logits[t * s.experts + e]) : -INFINITY;
  const float mx = detail::warp_max(v);
  const float ex = valid ? expf(v - mx) : 0.0f;
  const float w = ex / detail::warp_sum(ex);
  const float dw = lane < k ? dweights[t * k + lane] : 0.0f;
  const float wdw = detail::warp_sum(valid ? w * dw : 0.0f);
  chosen[warp][lane] = valid ? e : -1;
  grad[warp][lane] = valid ? w * (dw - wdw) : 0.0f;
  __syncwarp();
  for (int c = lane; c < s.experts; c += 32) {
    float g = 0.0f;  // in choice order, as the CPU reference adds
    for (int j = 0; j < k; ++j)
      if (chosen[warp][j] == c) g += grad[warp][j];
    dlogits[t * s.experts + c] = g;
  }
}

unsigned warp_blocks(int64_t tokens) {
  return static_cast<unsigned>((tokens + warps_per_block - 1) / warps_per_block);
}

}  // namespace

template <class T>
void moe_route(const T* logits, float* weights, int32_t* experts, int32_t* slots, const ops::MoeShape& s,
               cudaStream_t stream) {
  if (s.experts > moe_route_max_experts || s.top_k > moe_route_max_top_k || s.top_k > s.experts)
    throw std::invalid_argument("moe_route: the router takes at most " + std::to_string(moe_route_max_experts) +
                                " experts and top_k up to " + std::to_string(moe_route_max_top_k) +
                                " and the experts (has " + std::to_string(s.experts) + ", top_k " +
                                std::to_string(s.top_k) + ")");
  if (s.tokens <= 0 || s.top_k <= 0) return;
  route_topk_kernel<T><<<warp_blocks(s.tokens), warps_per_block * 32, 0, stream>>>(logits, weights, experts, s);
  PERFSIM_CUDA_CHECK_LAUNCH();
  route_slots_kernel<<<static_cast<unsigned>(s.experts), scan_threads, 0, stream>>>(experts, slots, s);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void moe_route_bwd(const T* logits, const int32_t* experts, const float* dweights, float* dlogits,
                   const ops::MoeShape& s, cudaStream_t stream) {
  if (s.top_k > moe_route_max_top_k)
    throw std::invalid_argument("moe_route_bwd: top_k " + std::to_string(s.top_k) + " exceeds " +
                                std::to_string(moe_route_max_top_k));
  if (s.tokens <= 0 || s.experts <= 0) return;
  route_bwd_kernel<T><<<warp_blocks(s.tokens), warps_per_block * 32, 0, stream>>>(logits, experts, dweights,
                                                                                  dlogits, s);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

#define PERFSIM_CUDA_INSTANTIATE_MOE_ROUTE(T)                                                       \
  template void moe_route<T>(const T*, float*, int32_t*, int32_t*, const ops::MoeShape&, cudaStream_t); \
  template void moe_route_bwd<T>(const T*, const int32_t*, const float*, float*, const ops::MoeShape&,  \
                                 cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_MOE_ROUTE(float)
PERFSIM_CUDA_INSTANTIATE_MOE_ROUTE(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_MOE_ROUTE(__half)

}  // namespace perfsim::cuda
