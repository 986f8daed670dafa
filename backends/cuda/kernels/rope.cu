// Rotary position embeddings (RoFormer, Su et al. 2021, "rotate half" pairing (i, i + d/2))
// and the inverse rotation for the backward. x, y [tokens, heads, head_dim]. The angle
// pos·10000^(−2i/d) and its sine/cosine are computed once per (token, pair i), exactly as the
// CPU reference does (frequency rounded to float, angle and sin/cos in double). Vector path
// (even head_dim, d/2 a multiple of a 16-byte pack, aligned rows): one block per token puts
// the token's cos/sin in shared memory, then each thread rotates one pack of pairs of one
// head with 16-byte loads of both halves. Otherwise one thread per (token, pair) rotates that
// pair in every head.
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/pointwise.cuh"

namespace perfsim::cuda {

namespace {

template <class T>
__global__ void rope_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t tokens,
                            int64_t heads, int64_t d, ops::RopeShape r, float sign) {
  const int64_t half_d = d / 2;
  const int64_t pairs = half_d > 0 ? half_d : 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       w < tokens * pairs; w += stride) {
    const int64_t t = w / pairs, i = w % pairs;
    const T* xt = x + t * heads * d;
    T* yt = y + t * heads * d;
    if (half_d > 0) {
      const double pos = static_cast<double>(r.position_of(t));
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

template <class T, int V>
__global__ void rope_vec_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t heads,
                                int64_t d, ops::RopeShape r, float sign) {
  extern __shared__ float cos_sin[];  // [half_d] cos, then [half_d] sign·sin
  const int64_t t = blockIdx.x, half_d = d / 2;
  const double pos = static_cast<double>(r.position_of(t));
  for (int64_t i = threadIdx.x; i < half_d; i += blockDim.x) {
    // The frequency is rounded to float as the CPU reference stores it.
    const double inv_freq = static_cast<float>(pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d)));
    double sd, cd;
    sincos(pos * inv_freq, &sd, &cd);
    cos_sin[i] = static_cast<float>(cd);
    cos_sin[half_d + i] = sign * static_cast<float>(sd);
  }
  __syncthreads();
  const int64_t groups = half_d / V;
  const T* xt = x + t * heads * d;
  T* yt = y + t * heads * d;
  for (int64_t w = threadIdx.x; w < heads * groups; w += blockDim.x) {
    const int64_t h = w / groups, i0 = (w % groups) * V;
    float a[V], b[V], o1[V], o2[V];
    detail::load_f32<T, V>(xt + h * d + i0, a);
    detail::load_f32<T, V>(xt + h * d + half_d + i0, b);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float c = cos_sin[i0 + e], s = cos_sin[half_d + i0 + e];
      o1[e] = a[e] * c - b[e] * s;
      o2[e] = b[e] * c + a[e] * s;
    }
    detail::store_f32<T, V>(yt + h * d + i0, o1);
    detail::store_f32<T, V>(yt + h * d + half_d + i0, o2);
  }
}

template <class T>
void rotate(const T* x, T* y, ops::RopeShape r, float sign, cudaStream_t stream) {
  if (r.tokens <= 0 || r.heads <= 0 || r.head_dim <= 0) return;
  if (r.seq <= 0) r.seq = 1;
  constexpr int V = detail::vec_of<T>;
  const int64_t half_d = r.head_dim / 2;
  if (r.head_dim % 2 == 0 && half_d % V == 0 && detail::aligned(16, x, y)) {
    const int64_t items = r.heads * (half_d / V);
    int threads = static_cast<int>(((items < 256 ? items : 256) + 31) / 32 * 32);
    rope_vec_kernel<T, V><<<static_cast<unsigned>(r.tokens), threads,
                            static_cast<size_t>(2 * half_d) * sizeof(float), stream>>>(
        x, y, r.heads, r.head_dim, r, sign);
    PERFSIM_CUDA_CHECK_LAUNCH();
    return;
  }
  const int64_t work = r.tokens * (half_d > 0 ? half_d : 1);
  constexpr int threads = 256;
  rope_kernel<T><<<detail::grid_for(work, threads), threads, 0, stream>>>(
      x, y, r.tokens, r.heads, r.head_dim, r, sign);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void rope(const T* x, T* y, const ops::RopeShape& r, cudaStream_t stream) {
  rotate(x, y, r, 1.0f, stream);
}
template <class T>
void rope_bwd(const T* dy, T* dx, const ops::RopeShape& r, cudaStream_t stream) {
  rotate(dy, dx, r, -1.0f, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_ROPE(T)                                         \
  template void rope<T>(const T*, T*, const ops::RopeShape&, cudaStream_t);      \
  template void rope_bwd<T>(const T*, T*, const ops::RopeShape&, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_ROPE(float)
PERFSIM_CUDA_INSTANTIATE_ROPE(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_ROPE(__half)

}  // namespace perfsim::cuda
