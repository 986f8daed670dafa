// Rotary position embeddings (RoFormer, Su et al. 2021, "rotate half" pairing (i, i + d/2))
// and the inverse rotation for the backward. x, y [tokens, heads, head_dim]. One thread per
// (token, pair i): it computes the angle pos·10000^(−2i/d) and its sine/cosine once, exactly
// as the CPU reference does (frequency rounded to float, angle and sin/cos in double), and
// rotates that pair in every head.
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

template <class T>
void rotate(const T* x, T* y, const cpu::RopeShape& r, float sign, cudaStream_t stream) {
  if (r.tokens <= 0 || r.heads <= 0 || r.head_dim <= 0) return;
  const int64_t work = r.tokens * (r.head_dim / 2 > 0 ? r.head_dim / 2 : 1);
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
