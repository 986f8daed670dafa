// Batch normalization over NHWC activations seen as [rows, channels] (rows = batch·height·
// width; Ioffe & Szegedy 2015, Alg. 1): training normalizes by the batch's per-channel mean and
// biased variance and keeps the mean and 1/√(var + eps) for the backward; inference uses running
// statistics. Sums are fp64 over the rows, so the statistics do not depend on the row count's
// rounding; the running statistics' update (a [channels] blend) is left to the optimizer side.
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"

namespace perfsim::cpu {

namespace {

// Per-channel sums of f(row, channel) over the rows, channel blocks in parallel.
template <class F>
std::vector<double> channel_sums(int64_t rows, int64_t cols, F f) {
  std::vector<double> out(static_cast<std::size_t>(cols), 0.0);
  parallel_for(cols, 64, [&](int64_t b, int64_t e) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = b; c < e; ++c) out[static_cast<std::size_t>(c)] += f(r, c);
  });
  return out;
}

}  // namespace

template <class T>
void batchnorm(const T* x, const T* gamma, const T* beta, T* y, float* mean, float* rstd, int64_t rows, int64_t cols,
               float eps) {
  const auto sum = channel_sums(rows, cols, [&](int64_t r, int64_t c) { return double(to_f32(x[r * cols + c])); });
  std::vector<float> mu(static_cast<std::size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) mu[static_cast<std::size_t>(c)] = static_cast<float>(sum[static_cast<std::size_t>(c)] / double(rows));
  const auto sq = channel_sums(rows, cols, [&](int64_t r, int64_t c) {
    const double d = double(to_f32(x[r * cols + c])) - mu[static_cast<std::size_t>(c)];
    return d * d;
  });
  for (int64_t c = 0; c < cols; ++c) {
    mean[c] = mu[static_cast<std::size_t>(c)];
    rstd[c] = static_cast<float>(1.0 / std::sqrt(sq[static_cast<std::size_t>(c)] / double(rows) + eps));
  }
  parallel_for(rows, 256, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t c = 0; c < cols; ++c)
        y[r * cols + c] = from_f32<T>((to_f32(x[r * cols + c]) - mean[c]) * rstd[c] * to_f32(gamma[c]) + to_f32(beta[c]));
  });
}

template <class T>
void batchnorm_infer(const T* x, const T* gamma, const T* beta, const float* mean, const float* var, T* y,
                     int64_t rows, int64_t cols, float eps) {
  std::vector<float> scale(static_cast<std::size_t>(cols)), shift(static_cast<std::size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    scale[static_cast<std::size_t>(c)] = to_f32(gamma[c]) / std::sqrt(var[c] + eps);
    shift[static_cast<std::size_t>(c)] = to_f32(beta[c]) - mean[c] * scale[static_cast<std::size_t>(c)];
  }
  parallel_for(rows, 256, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t c = 0; c < cols; ++c)
        y[r * cols + c] = from_f32<T>(to_f32(x[r * cols + c]) * scale[static_cast<std::size_t>(c)] + shift[static_cast<std::size_t>(c)]);
  });
}

template <class T>
void batchnorm_bwd(const T* x, const T* gamma, const float* mean, const float* rstd, const T* dy, T* dx, T* dgamma,
                   T* dbeta, int64_t rows, int64_t cols) {
  auto xhat = [&](int64_t r, int64_t c) { return (to_f32(x[r * cols + c]) - mean[c]) * rstd[c]; };
  const auto sum_dy = channel_sums(rows, cols, [&](int64_t r, int64_t c) { return double(to_f32(dy[r * cols + c])); });
  const auto sum_dy_xhat =
      channel_sums(rows, cols, [&](int64_t r, int64_t c) { return double(to_f32(dy[r * cols + c])) * xhat(r, c); });
  for (int64_t c = 0; c < cols; ++c) {
    dbeta[c] = from_f32<T>(static_cast<float>(sum_dy[static_cast<std::size_t>(c)]));
    dgamma[c] = from_f32<T>(static_cast<float>(sum_dy_xhat[static_cast<std::size_t>(c)]));
  }
  // dx = γ·rstd·(dy − mean(dy) − x̂·mean(dy·x̂)).
  const double inv_rows = 1.0 / double(rows);
  parallel_for(rows, 256, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const auto k = static_cast<std::size_t>(c);
        const double g = double(to_f32(dy[r * cols + c])) - sum_dy[k] * inv_rows - xhat(r, c) * sum_dy_xhat[k] * inv_rows;
        dx[r * cols + c] = from_f32<T>(static_cast<float>(to_f32(gamma[c]) * rstd[c] * g));
      }
  });
}

#define PERFSIM_INSTANTIATE_BATCHNORM(T)                                                                     \
  template void batchnorm<T>(const T*, const T*, const T*, T*, float*, float*, int64_t, int64_t, float);     \
  template void batchnorm_infer<T>(const T*, const T*, const T*, const float*, const float*, T*, int64_t,   \
                                   int64_t, float);                                                          \
  template void batchnorm_bwd<T>(const T*, const T*, const float*, const float*, const T*, T*, T*, T*, int64_t, \
                                 int64_t);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_BATCHNORM)

}  // namespace perfsim::cpu
