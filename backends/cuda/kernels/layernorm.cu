// LayerNorm (Ba et al. 2016) over rows of x [rows, cols]: y = (x − mean)·rstd·gamma + beta, its
// backward (dx, and dgamma/dbeta) and the fused residual add + LayerNorm. This file holds the
// LayerNorm policy, the math of the shared norm kernels (norm_forward.cuh, norm_backward.cuh),
// and the entry points of norms.cuh built from it.
#include "backends/cuda/kernels/norm_backward.cuh"
#include "backends/cuda/kernels/norm_forward.cuh"
#include "backends/cuda/kernels/norms.cuh"

namespace perfsim::cuda {

namespace {

// Statistics about the row mean (two-pass mean and variance in the forward, for accuracy),
// and a bias. The forward always sweeps the row. The backward averages its sums with one
// multiplication by 1/cols.
struct LayerNormPolicy {
  static constexpr bool centered = true;
  static constexpr bool has_bias = true;
  static constexpr bool fwd_holds_row = false;
  static constexpr int bwd_sums = 3;  // Σ d², Σ g, Σ g·d

  __device__ static void bwd_add(float* acc, float d, float dy, float gamma) {
    const float g = dy * gamma;
    acc[0] += d * d;
    acc[1] += g;
    acc[2] += g * d;
  }
  __device__ static detail::RowTerms terms_about_mean(const float* acc, float mean, int64_t cols,
                                                      float eps) {
    const float inv_cols = 1.0f / static_cast<float>(cols);
    const float rstd = 1.0f / sqrtf(acc[0] * inv_cols + eps);
    return {mean, rstd, acc[1] * inv_cols, acc[2] * rstd * inv_cols};
  }
  __device__ static detail::RowTerms terms_about_shift(const float* acc, float shift, int64_t cols,
                                                       float eps) {
    const float inv_cols = 1.0f / static_cast<float>(cols);
    const float mk = acc[0] * inv_cols;  // mean − K
    const float mean = shift + mk;
    const float var = fmaxf(acc[1] * inv_cols - mk * mk, 0.0f);
    const float rstd = 1.0f / sqrtf(var + eps);
    // Σ g·(x−mean) = Σ g·(x−K) − (mean−K)·Σ g
    return {mean, rstd, acc[2] * inv_cols, (acc[3] - mk * acc[2]) * rstd * inv_cols};
  }
};

}  // namespace

template <class T>
void layernorm(const T* x, const T* gamma, const T* beta, T* y, int64_t rows, int64_t cols,
               float eps, cudaStream_t stream) {
  detail::norm_fwd<LayerNormPolicy>(x, gamma, beta, y, rows, cols, eps, stream);
}

template <class T>
void add_layernorm(const T* a, const T* b, const T* gamma, const T* beta, T* sum, T* y,
                   int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  detail::add_norm<LayerNormPolicy>(a, b, gamma, beta, sum, y, rows, cols, eps, stream);
}

template <class T>
void layernorm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma, T* dbeta,
                   int64_t rows, int64_t cols, float eps, float* workspace, cudaStream_t stream) {
  detail::norm_bwd<LayerNormPolicy>(x, gamma, dy, dx, dgamma, dbeta, rows, cols, eps, workspace,
                                    stream);
}

#define PERFSIM_CUDA_INSTANTIATE_LAYERNORM(T)                                                  \
  template void layernorm<T>(const T*, const T*, const T*, T*, int64_t, int64_t, float,        \
                             cudaStream_t);                                                    \
  template void add_layernorm<T>(const T*, const T*, const T*, const T*, T*, T*, int64_t,      \
                                 int64_t, float, cudaStream_t);                                \
  template void layernorm_bwd<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t,   \
                                 float, float*, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_LAYERNORM(float)
PERFSIM_CUDA_INSTANTIATE_LAYERNORM(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_LAYERNORM(__half)

}  // namespace perfsim::cuda
