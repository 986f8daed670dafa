// GELU (tanh approximation, Hendrycks & Gimpel 2016), SwiGLU's silu(gate)·up (Shazeer 2020),
// their backward passes and the residual add: one generic vectorized grid-stride kernel
// applied to a small functor per op. x, y, ... [n]. Also rope_at, rotary embeddings at
// per-token positions (a serving engine's packed step), laid out as rope.cu's kernels.
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/pointwise.cuh"

namespace perfsim::cuda {

namespace {

constexpr float gelu_k = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float gelu_c = 0.044715f;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
// tanh(u) = 1 − 2/(e^{2u} + 1), as the CPU reference computes it (saturates cleanly).
__device__ __forceinline__ float tanh_abs(float u) { return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f); }

struct GeluOp {
  static constexpr int ins = 1, outs = 1;
  __device__ void operator()(const float* in, float* out) const {
    const float v = in[0];
    out[0] = 0.5f * v * (1.0f + tanh_abs(gelu_k * (v + gelu_c * v * v * v)));
  }
};
struct GeluBwdOp {
  static constexpr int ins = 2, outs = 1;  // x, dy -> dx
  __device__ void operator()(const float* in, float* out) const {
    const float v = in[0];
    const float t = tanh_abs(gelu_k * (v + gelu_c * v * v * v));
    const float du = gelu_k * (1.0f + 3.0f * gelu_c * v * v);
    out[0] = (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du) * in[1];
  }
};
struct SiluMulOp {
  static constexpr int ins = 2, outs = 1;  // gate, up -> y
  __device__ void operator()(const float* in, float* out) const {
    out[0] = in[0] * sigmoid(in[0]) * in[1];
  }
};
struct SiluMulBwdOp {
  static constexpr int ins = 3, outs = 2;  // gate, up, dy -> dgate, dup
  __device__ void operator()(const float* in, float* out) const {
    const float g = in[0], u = in[1], d = in[2], s = sigmoid(g);
    out[0] = d * u * s * (1.0f + g * (1.0f - s));  // d silu(g)/dg = s·(1 + g·(1 − s))
    out[1] = d * g * s;
  }
};
struct AddOp {
  static constexpr int ins = 2, outs = 1;
  __device__ void operator()(const float* in, float* out) const { out[0] = in[0] + in[1]; }
};

template <class T, int N>
struct Ptrs {
  T* p[N];
};

template <class T, int V, class Op>
__global__ void elementwise_kernel(Ptrs<const T, Op::ins> in, Ptrs<T, Op::outs> out, int64_t n,
                                   Op op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nvec = n / V;
  for (int64_t i = first; i < nvec; i += stride) {
    float a[Op::ins][V], b[Op::outs][V];
#pragma unroll
    for (int k = 0; k < Op::ins; ++k) detail::load_f32<T, V>(in.p[k] + i * V, a[k]);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      float x[Op::ins], y[Op::outs];
#pragma unroll
      for (int k = 0; k < Op::ins; ++k) x[k] = a[k][e];
      op(x, y);
#pragma unroll
      for (int k = 0; k < Op::outs; ++k) b[k][e] = y[k];
    }
#pragma unroll
    for (int k = 0; k < Op::outs; ++k) detail::store_f32<T, V>(out.p[k] + i * V, b[k]);
  }
  for (int64_t i = nvec * V + first; i < n; i += stride) {  // tail (< V elements)
    float x[Op::ins], y[Op::outs];
#pragma unroll
    for (int k = 0; k < Op::ins; ++k) x[k] = detail::to_f32(in.p[k][i]);
    op(x, y);
#pragma unroll
    for (int k = 0; k < Op::outs; ++k) out.p[k][i] = detail::from_f32<T>(y[k]);
  }
}

template <class T, class Op>
void launch(Ptrs<const T, Op::ins> in, Ptrs<T, Op::outs> out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  bool vec = true;
  for (const T* p : in.p) vec = vec && detail::aligned(16, p);
  for (const T* p : out.p) vec = vec && detail::aligned(16, p);
  constexpr int threads = 256;
  if (vec) {
    constexpr int V = detail::vec_of<T>;
    elementwise_kernel<T, V, Op><<<detail::grid_for(n / V + 1, threads), threads, 0, stream>>>(
        in, out, n, Op{});
  } else {
    elementwise_kernel<T, 1, Op><<<detail::grid_for(n, threads), threads, 0, stream>>>(in, out, n,
                                                                                        Op{});
  }
  PERFSIM_CUDA_CHECK_LAUNCH();
}

// The angle pos·10000^(−2i/d) of pair i as rope.cu and the CPU reference form it (frequency
// rounded to float, angle and sin/cos in double): cos, and sin.
__device__ __forceinline__ void rope_cos_sin(double pos, int64_t i, int64_t d, float& c, float& s) {
  const double inv_freq = static_cast<float>(pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d)));
  double sd, cd;
  sincos(pos * inv_freq, &sd, &cd);
  c = static_cast<float>(cd);
  s = static_cast<float>(sd);
}

// One block per token: its cos/sin in shared memory, then one thread per pack of V pairs of
// one head (16-byte loads of both halves).
template <class T, int V>
__global__ void rope_at_vec_kernel(const T* __restrict__ x, const int32_t* __restrict__ positions,
                                   T* __restrict__ y, int64_t heads, int64_t d) {
  extern __shared__ float cos_sin[];  // [half_d] cos, then [half_d] sin
  const int64_t t = blockIdx.x, half_d = d / 2;
  const double pos = static_cast<double>(positions[t]);
  for (int64_t i = threadIdx.x; i < half_d; i += blockDim.x) rope_cos_sin(pos, i, d, cos_sin[i], cos_sin[half_d + i]);
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
      const float c = cos_sin[i0 + e], sn = cos_sin[half_d + i0 + e];
      o1[e] = a[e] * c - b[e] * sn;
      o2[e] = b[e] * c + a[e] * sn;
    }
    detail::store_f32<T, V>(yt + h * d + i0, o1);
    detail::store_f32<T, V>(yt + h * d + half_d + i0, o2);
  }
}

// Any layout: one thread per (token, pair) rotates that pair in every head.
template <class T>
__global__ void rope_at_kernel(const T* __restrict__ x, const int32_t* __restrict__ positions, T* __restrict__ y,
                               int64_t tokens, int64_t heads, int64_t d) {
  const int64_t half_d = d / 2;
  const int64_t pairs = half_d > 0 ? half_d : 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < tokens * pairs; w += stride) {
    const int64_t t = w / pairs, i = w % pairs;
    const T* xt = x + t * heads * d;
    T* yt = y + t * heads * d;
    if (half_d > 0) {
      float c, sn;
      rope_cos_sin(static_cast<double>(positions[t]), i, d, c, sn);
      for (int64_t h = 0; h < heads; ++h) {
        const float a = detail::to_f32(xt[h * d + i]), b = detail::to_f32(xt[h * d + i + half_d]);
        yt[h * d + i] = detail::from_f32<T>(a * c - b * sn);
        yt[h * d + i + half_d] = detail::from_f32<T>(b * c + a * sn);
      }
    }
    if (d % 2 != 0 && i == 0)  // an odd last element has no partner
      for (int64_t h = 0; h < heads; ++h) yt[h * d + d - 1] = xt[h * d + d - 1];
  }
}

}  // namespace

template <class T>
void gelu(const T* x, T* y, int64_t n, cudaStream_t stream) {
  launch<T, GeluOp>({{x}}, {{y}}, n, stream);
}
template <class T>
void gelu_bwd(const T* x, const T* dy, T* dx, int64_t n, cudaStream_t stream) {
  launch<T, GeluBwdOp>({{x, dy}}, {{dx}}, n, stream);
}
template <class T>
void silu_mul(const T* gate, const T* up, T* y, int64_t n, cudaStream_t stream) {
  launch<T, SiluMulOp>({{gate, up}}, {{y}}, n, stream);
}
template <class T>
void silu_mul_bwd(const T* gate, const T* up, const T* dy, T* dgate, T* dup, int64_t n,
                  cudaStream_t stream) {
  launch<T, SiluMulBwdOp>({{gate, up, dy}}, {{dgate, dup}}, n, stream);
}
template <class T>
void residual_add(const T* a, const T* b, T* out, int64_t n, cudaStream_t stream) {
  launch<T, AddOp>({{a, b}}, {{out}}, n, stream);
}

template <class T>
void rope_at(const T* x, const int32_t* positions, T* y, const ops::RopeShape& r, cudaStream_t stream) {
  if (r.tokens <= 0 || r.heads <= 0 || r.head_dim <= 0) return;
  constexpr int V = detail::vec_of<T>;
  const int64_t half_d = r.head_dim / 2;
  if (r.head_dim % 2 == 0 && half_d % V == 0 && detail::aligned(16, x, y)) {
    const int64_t items = r.heads * (half_d / V);
    const int threads = static_cast<int>(((items < 256 ? items : 256) + 31) / 32 * 32);
    rope_at_vec_kernel<T, V><<<static_cast<unsigned>(r.tokens), threads,
                               static_cast<size_t>(2 * half_d) * sizeof(float), stream>>>(x, positions, y, r.heads,
                                                                                          r.head_dim);
  } else {
    constexpr int threads = 256;
    rope_at_kernel<T><<<detail::grid_for(r.tokens * (half_d > 0 ? half_d : 1), threads), threads, 0, stream>>>(
        x, positions, y, r.tokens, r.heads, r.head_dim);
  }
  PERFSIM_CUDA_CHECK_LAUNCH();
}

#define PERFSIM_CUDA_INSTANTIATE_POINTWISE(T)                                                  \
  template void gelu<T>(const T*, T*, int64_t, cudaStream_t);                                  \
  template void gelu_bwd<T>(const T*, const T*, T*, int64_t, cudaStream_t);                    \
  template void silu_mul<T>(const T*, const T*, T*, int64_t, cudaStream_t);                    \
  template void silu_mul_bwd<T>(const T*, const T*, const T*, T*, T*, int64_t, cudaStream_t);  \
  template void residual_add<T>(const T*, const T*, T*, int64_t, cudaStream_t);                \
  template void rope_at<T>(const T*, const int32_t*, T*, const ops::RopeShape&, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_POINTWISE(float)
PERFSIM_CUDA_INSTANTIATE_POINTWISE(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_POINTWISE(__half)

}  // namespace perfsim::cuda
