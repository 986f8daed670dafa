// Normalizations over the last dimension of x [rows, cols]: layernorm (Ba et al. 2016) and
// rmsnorm (Zhang & Sennrich 2019), their backward passes, and the fused residual-add +
// norm used by the fusion pass. Rows run in parallel; the gamma/beta gradients are summed
// over rows per column block in a fixed order, so results do not depend on the thread count.
#include <cmath>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"

namespace perfsim::cpu {

using detail::thread_scratch;

namespace {

int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(cols, 1)); }
constexpr int64_t col_block = 64;

struct Stats {
  float mean, rstd;
};

// Mean and 1/sqrt(var + eps) of a float row (two passes for accuracy).
Stats layer_stats(const float* x, int64_t n, float eps) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(n);
  float var = 0;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  return {mean, 1.0f / std::sqrt(var / static_cast<float>(n) + eps)};
}

// 1/sqrt(mean(x²) + eps) of a float row.
float rms_rstd(const float* x, int64_t n, float eps) {
  float ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  return 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
}

// Per-row statistics for the backward passes (one small float vector per call).
template <class T, class F>
void row_stats(const T* x, int64_t rows, int64_t cols, std::vector<Stats>& out, F stats_of) {
  out.resize(static_cast<std::size_t>(rows));
  parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    float* xf = thread_scratch(0, static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r)
      out[static_cast<std::size_t>(r)] = stats_of(detail::as_float(x + r * cols, cols, xf));
  });
}

}  // namespace

template <class T>
void layernorm(const T* x, const T* gamma, const T* beta, T* y, int64_t rows, int64_t cols, float eps) {
  parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    float* xb = thread_scratch(0, static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      const float* xf = detail::as_float(x + r * cols, cols, xb);
      const Stats st = layer_stats(xf, cols, eps);
      T* yr = y + r * cols;
      for (int64_t c = 0; c < cols; ++c)
        yr[c] = from_f32<T>((xf[c] - st.mean) * st.rstd * to_f32(gamma[c]) + to_f32(beta[c]));
    }
  });
}

template <class T>
void layernorm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma, T* dbeta,
                   int64_t rows, int64_t cols, float eps) {
  std::vector<Stats> stats;
  row_stats(x, rows, cols, stats, [&](const float* xf) { return layer_stats(xf, cols, eps); });
  // dx = rstd · (g − mean(g) − x̂·mean(g ⊙ x̂)), g = dy ⊙ gamma
  parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    float* xb = thread_scratch(0, static_cast<std::size_t>(cols));
    float* gb = thread_scratch(1, static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      const float* xf = detail::as_float(x + r * cols, cols, xb);
      const Stats st = stats[static_cast<std::size_t>(r)];
      float sum_g = 0, sum_gx = 0;
      for (int64_t c = 0; c < cols; ++c) {
        gb[c] = to_f32(dy[r * cols + c]) * to_f32(gamma[c]);
        sum_g += gb[c];
        sum_gx += gb[c] * (xf[c] - st.mean) * st.rstd;
      }
      const float mg = sum_g / static_cast<float>(cols), mgx = sum_gx / static_cast<float>(cols);
      for (int64_t c = 0; c < cols; ++c) {
        const float xh = (xf[c] - st.mean) * st.rstd;
        dx[r * cols + c] = from_f32<T>(st.rstd * (gb[c] - mg - xh * mgx));
      }
    }
  });
  // dgamma = Σ_rows dy ⊙ x̂, dbeta = Σ_rows dy
  const int64_t blocks = (cols + col_block - 1) / col_block;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * col_block, c1 = std::min(cols, c0 + col_block);
      float dg[col_block] = {}, db[col_block] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const Stats st = stats[static_cast<std::size_t>(r)];
        for (int64_t c = c0; c < c1; ++c) {
          const float g = to_f32(dy[r * cols + c]);
          dg[c - c0] += g * (to_f32(x[r * cols + c]) - st.mean) * st.rstd;
          db[c - c0] += g;
        }
      }
      for (int64_t c = c0; c < c1; ++c) {
        dgamma[c] = from_f32<T>(dg[c - c0]);
        dbeta[c] = from_f32<T>(db[c - c0]);
      }
    }
  });
}

template <class T>
void rmsnorm(const T* x, const T* gamma, T* y, int64_t rows, int64_t cols, float eps) {
  parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    float* xb = thread_scratch(0, static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      const float* xf = detail::as_float(x + r * cols, cols, xb);
      const float rstd = rms_rstd(xf, cols, eps);
      T* yr = y + r * cols;
      for (int64_t c = 0; c < cols; ++c) yr[c] = from_f32<T>(xf[c] * rstd * to_f32(gamma[c]));
    }
  });
}

template <class T>
void rmsnorm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma, int64_t rows,
                 int64_t cols, float eps) {
  std::vector<Stats> stats;
  row_stats(x, rows, cols, stats, [&](const float* xf) { return Stats{0, rms_rstd(xf, cols, eps)}; });
  // dx = rstd · (g − x̂·mean(g ⊙ x̂)), g = dy ⊙ gamma, x̂ = x·rstd
  parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    float* xb = thread_scratch(0, static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      const float* xf = detail::as_float(x + r * cols, cols, xb);
      const float rstd = stats[static_cast<std::size_t>(r)].rstd;
      float sum_gx = 0;
      for (int64_t c = 0; c < cols; ++c)
        sum_gx += to_f32(dy[r * cols + c]) * to_f32(gamma[c]) * xf[c] * rstd;
      const float mgx = sum_gx / static_cast<float>(cols);
      for (int64_t c = 0; c < cols; ++c) {
        const float g = to_f32(dy[r * cols + c]) * to_f32(gamma[c]);
        dx[r * cols + c] = from_f32<T>(rstd * (g - xf[c] * rstd * mgx));
      }
    }
  });
  // dgamma = Σ_rows dy ⊙ x̂
  const int64_t blocks = (cols + col_block - 1) / col_block;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * col_block, c1 = std::min(cols, c0 + col_block);
      float dg[col_block] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const float rstd = stats[static_cast<std::size_t>(r)].rstd;
        for (int64_t c = c0; c < c1; ++c)
          dg[c - c0] += to_f32(dy[r * cols + c]) * to_f32(x[r * cols + c]) * rstd;
      }
      for (int64_t c = c0; c < c1; ++c) dgamma[c] = from_f32<T>(dg[c - c0]);
    }
  });
}

// Row r of sum = a + b, stored in T, and widened into sf: the fused norms normalize the sum as
// stored, so they equal residual_add followed by the norm.
template <class T>
void add_row(const T* a, const T* b, T* sum, float* sf, int64_t r, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    const T s = from_f32<T>(to_f32(a[r * cols + c]) + to_f32(b[r * cols + c]));
    sum[r * cols + c] = s;
    sf[c] = to_f32(s);
  }
}

template <class T>
void add_rmsnorm(const T* a, const T* b, const T* gamma, T* sum, T* y, int64_t rows, int64_t cols,
                 float eps) {
  parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    float* sf = thread_scratch(0, static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      add_row(a, b, sum, sf, r, cols);
      const float rstd = rms_rstd(sf, cols, eps);
      for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = from_f32<T>(sf[c] * rstd * to_f32(gamma[c]));
    }
  });
}

template <class T>
void add_layernorm(const T* a, const T* b, const T* gamma, const T* beta, T* sum, T* y,
                   int64_t rows, int64_t cols, float eps) {
  parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    float* sf = thread_scratch(0, static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      add_row(a, b, sum, sf, r, cols);
      const Stats st = layer_stats(sf, cols, eps);
      for (int64_t c = 0; c < cols; ++c)
        y[r * cols + c] = from_f32<T>((sf[c] - st.mean) * st.rstd * to_f32(gamma[c]) + to_f32(beta[c]));
    }
  });
}

#define PERFSIM_INSTANTIATE_NORMS(T)                                                             \
  template void layernorm<T>(const T*, const T*, const T*, T*, int64_t, int64_t, float);         \
  template void layernorm_bwd<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t, float); \
  template void rmsnorm<T>(const T*, const T*, T*, int64_t, int64_t, float);                     \
  template void rmsnorm_bwd<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, float);   \
  template void add_rmsnorm<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, float);   \
  template void add_layernorm<T>(const T*, const T*, const T*, const T*, T*, T*, int64_t, int64_t, float);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_NORMS)

}  // namespace perfsim::cpu
