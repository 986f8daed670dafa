// Rotary position embeddings (RoFormer, Su et al. 2021, "rotate half" pairing (i, i + d/2))
// and the inverse rotation for the backward. x, y [tokens, heads, head_dim]. The angle
// pos·inv_freq(i) is formed in double from inv_freq = 10000^(−2i/d) rounded to float, as the
// CPU reference does. Vector path (even head_dim, d/2 a multiple of a 16-byte pack, aligned
// rows): a block takes a few tokens, forms each inv_freq once, and each (token, pair)'s cosine
// and sine once in shared memory; its threads then rotate one pack of pairs of one head with
// 16-byte loads of both halves. The angle is reduced to [−π, π] in double before a float
// sincos, so the cosines match the reference's double ones rounded to float within ~1 ulp at
// positions in the hundreds of thousands, and the kernel streams memory instead of spending
// its time in double-precision sin, cos and pow (which made a few-head rotation over many
// tokens several times slower than its bytes). Otherwise one thread per (token, pair) rotates
// that pair in every head.
#include <algorithm>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/pointwise.cuh"

namespace perfsim::cuda {

namespace {

template <class T>
__global__ void rope_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t tokens,
                            int64_t heads, int64_t d, int64_t seq, int64_t position, float sign) {
  const int64_t half_d = d / 2;
  const int64_t pairs = half_d > 0 ? half_d : 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       w < tokens * pairs; w += stride) {
    const int64_t t = w / pairs, i = w % pairs;
    const T* xt = x + t * heads * d;
    T* yt = y + t * heads * d;
    if (half_d > 0) {
      const double pos = static_cast<double>(position + t % seq);
      // The frequency is rounded to float as the CPU reference stores it; the angle, its sine
      // and cosine are then formed in double.
      const double inv_freq = static_cast<float>(pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d)));
      double sd, cd;
      sincos(pos * inv_freq, &sd, &cd);
      const float c = static_cast<float>(cd), s = sign * static_cast<float>(sd);
      for (int64_t h = 0; h < heads; ++h) {
        const float a = detail::to_f32(xt[h * d + i]), b = detail::to_f32(xt[h * d + i + half_d]);
        yt[h * d + i] = detail::from_f32<T>(a * c - b * s);
        yt[h * d + i + half_d] = detail::from_f32<T>(b * c + a * s);
      }
    }
    if (d % 2 != 0 && i == 0)  // an odd last element has no partner
      for (int64_t h = 0; h < heads; ++h) yt[h * d + d - 1] = xt[h * d + d - 1];
  }
}

// cos and sin of pos·inv_freq: the angle in double, reduced by the nearest multiple of 2π
// (its error stays below 1e-11 for any position an int64 tensor can index here), then sincosf.
__device__ __forceinline__ void angle_cos_sin(double pos, float inv_freq, float& c, float& s) {
  constexpr double two_pi = 6.283185307179586476925286766559;
  const double angle = pos * static_cast<double>(inv_freq);
  const double reduced = angle - two_pi * rint(angle / two_pi);
  sincosf(static_cast<float>(reduced), &s, &c);
}

template <class T, int V>
__global__ void rope_vec_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t tokens,
                                int64_t heads, int64_t d, int64_t seq, int64_t position, float sign,
                                int tokens_per_block) {
  // [half_d] inv_freq, then per token of the block [half_d] cos and [half_d] sign·sin.
  extern __shared__ float shared[];
  const int64_t half_d = d / 2;
  float* inv_freq = shared;
  float* cos_sin = shared + half_d;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * tokens_per_block;
  const int64_t count = tokens - first < tokens_per_block ? tokens - first : tokens_per_block;
  for (int64_t i = threadIdx.x; i < half_d; i += blockDim.x)
    inv_freq[i] = static_cast<float>(pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d)));
  __syncthreads();
  for (int64_t w = threadIdx.x; w < count * half_d; w += blockDim.x) {
    const int64_t lt = w / half_d, i = w % half_d;
    float c, s;
    angle_cos_sin(static_cast<double>(position + (first + lt) % seq), inv_freq[i], c, s);
    cos_sin[lt * d + i] = c;
    cos_sin[lt * d + half_d + i] = sign * s;
  }
  __syncthreads();
  const int64_t groups = half_d / V, per_token = heads * groups;
  for (int64_t w = threadIdx.x; w < count * per_token; w += blockDim.x) {
    const int64_t lt = w / per_token, h = (w % per_token) / groups, i0 = (w % groups) * V;
    const int64_t row = ((first + lt) * heads + h) * d;
    const float* cs = cos_sin + lt * d;
    float a[V], b[V], o1[V], o2[V];
    detail::load_f32<T, V>(x + row + i0, a);
    detail::load_f32<T, V>(x + row + half_d + i0, b);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float c = cs[i0 + e], s = cs[half_d + i0 + e];
      o1[e] = a[e] * c - b[e] * s;
      o2[e] = b[e] * c + a[e] * s;
    }
    detail::store_f32<T, V>(y + row + i0, o1);
    detail::store_f32<T, V>(y + row + half_d + i0, o2);
  }
}

template <class T>
void rotate(const T* x, T* y, const cpu::RopeShape& r, float sign, cudaStream_t stream) {
  if (r.tokens <= 0 || r.heads <= 0 || r.head_dim <= 0) return;
  constexpr int V = detail::vec_of<T>;
  const int64_t half_d = r.head_dim / 2;
  // Enough tokens per block for 256 rotations (few heads: several tokens share one block's
  // inv_freq), at most 16 so that long prompts still spread over every SM.
  constexpr int64_t target = 256, max_tokens = 16;
  constexpr size_t max_shared = 48 * 1024;  // without opting in to more
  const int64_t per_token = r.heads * std::max<int64_t>(1, half_d / V);
  const int64_t per_block = std::min(max_tokens, std::max<int64_t>(1, (target + per_token - 1) / per_token));
  const size_t shared = static_cast<size_t>(half_d + per_block * r.head_dim) * sizeof(float);
  if (r.head_dim % 2 == 0 && half_d % V == 0 && detail::aligned(16, x, y) && shared <= max_shared) {
    const int64_t work = std::max(per_block * per_token, per_block * half_d);
    const int threads = static_cast<int>(std::min<int64_t>(target, (work + 31) / 32 * 32));
    const auto blocks = static_cast<unsigned>((r.tokens + per_block - 1) / per_block);
    rope_vec_kernel<T, V><<<blocks, threads, shared, stream>>>(x, y, r.tokens, r.heads, r.head_dim,
                                                              r.seq > 0 ? r.seq : 1, r.position, sign,
                                                              static_cast<int>(per_block));
    PERFSIM_CUDA_CHECK_LAUNCH();
    return;
  }
  const int64_t work = r.tokens * (half_d > 0 ? half_d : 1);
  constexpr int threads = 256;
  rope_kernel<T><<<detail::grid_for(work, threads), threads, 0, stream>>>(
      x, y, r.tokens, r.heads, r.head_dim, r.seq > 0 ? r.seq : 1, r.position, sign);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void rope(const T* x, T* y, const cpu::RopeShape& r, cudaStream_t stream) {
  rotate(x, y, r, 1.0f, stream);
}
template <class T>
void rope_bwd(const T* dy, T* dx, const cpu::RopeShape& r, cudaStream_t stream) {
  rotate(dy, dx, r, -1.0f, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_ROPE(T)                                         \
  template void rope<T>(const T*, T*, const cpu::RopeShape&, cudaStream_t);      \
  template void rope_bwd<T>(const T*, T*, const cpu::RopeShape&, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_ROPE(float)
PERFSIM_CUDA_INSTANTIATE_ROPE(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_ROPE(__half)

}  // namespace perfsim::cuda
