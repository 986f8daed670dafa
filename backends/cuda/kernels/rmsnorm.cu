// RMSNorm (Zhang & Sennrich 2019) over rows of x [rows, cols]: y = x·rstd·gamma with
// rstd = 1/sqrt(mean(x²) + eps), its backward (dx, and dgamma) and the fused residual add +
// RMSNorm. This file holds the RMSNorm policy, the math of the shared norm kernels
// (norm_forward.cuh, norm_backward.cuh), and the entry points of norms.cuh built from it.
#include "backends/cuda/kernels/norm_backward.cuh"
#include "backends/cuda/kernels/norm_forward.cuh"
#include "backends/cuda/kernels/norms.cuh"

namespace perfsim::cuda {

namespace {

// Statistics about 0 (no mean), no bias: one sum per row in the forward, so a row that fits
// one block's registers is read from DRAM once, with no second sweep. The backward's sums are
// about 0 in both of its kernels and averaged by dividing by cols.
struct RmsNormPolicy {
  static constexpr bool centered = false;
  static constexpr bool has_bias = false;
  static constexpr bool fwd_holds_row = true;
  static constexpr int bwd_sums = 2;  // Σ x², Σ g·x

  __device__ static void bwd_add(float* acc, float x, float dy, float gamma) {
    acc[0] += x * x;
    acc[1] += dy * gamma * x;
  }
  __device__ static detail::RowTerms terms_about_mean(const float* acc, float, int64_t cols,
                                                      float eps) {
    const float rstd = detail::rstd_of(acc[0], cols, eps);
    return {0.0f, rstd, 0.0f, acc[1] * rstd / static_cast<float>(cols)};
  }
  __device__ static detail::RowTerms terms_about_shift(const float* acc, float, int64_t cols,
                                                       float eps) {
    return terms_about_mean(acc, 0.0f, cols, eps);
  }
};

}  // namespace

template <class T>
void rmsnorm(const T* x, const T* gamma, T* y, int64_t rows, int64_t cols, float eps,
             cudaStream_t stream) {
  detail::norm_fwd<RmsNormPolicy>(x, gamma, static_cast<const T*>(nullptr), y, rows, cols, eps,
                                  stream);
}

template <class T>
void add_rmsnorm(const T* a, const T* b, const T* gamma, T* sum, T* y, int64_t rows, int64_t cols,
                 float eps, cudaStream_t stream) {
  detail::add_norm<RmsNormPolicy>(a, b, gamma, static_cast<const T*>(nullptr), sum, y, rows, cols,
                                  eps, stream);
}

template <class T>
void rmsnorm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma, int64_t rows,
                 int64_t cols, float eps, float* workspace, cudaStream_t stream) {
  detail::norm_bwd<RmsNormPolicy>(x, gamma, dy, dx, dgamma, static_cast<T*>(nullptr), rows, cols,
                                  eps, workspace, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_RMSNORM(T)                                                    \
  template void rmsnorm<T>(const T*, const T*, T*, int64_t, int64_t, float, cudaStream_t);     \
  template void add_rmsnorm<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, float,  \
                               cudaStream_t);                                                  \
  template void rmsnorm_bwd<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, float,  \
                               float*, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_RMSNORM(float)
PERFSIM_CUDA_INSTANTIATE_RMSNORM(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_RMSNORM(__half)

}  // namespace perfsim::cuda
