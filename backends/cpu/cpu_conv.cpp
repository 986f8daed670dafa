// Convolutions over NHWC images (conv2d and its two gradients) as GEMMs over an unfolded input
// (im2col, Chellapilla et al. 2006): each output pixel's window, kernel_h·kernel_w·channels of a
// group, becomes one row of a matrix; the forward multiplies those rows by the group's filters,
// the data gradient multiplies dy by the filters and folds the rows back onto the image (col2im),
// the weight gradient multiplies dy's columns by the rows. Rows are unfolded a block of pixels at
// a time, so the scratch stays bounded whatever the batch. Accumulation is fp32 (OpenBLAS sgemm).
#include <algorithm>
#include <limits>
#include <vector>

#include "backends/common/parallel.hpp"
#include "backends/cpu/blas.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"

namespace perfsim::cpu {

namespace {

// Unfolded rows per block: about 4 M floats of scratch at most, at least one row.
int64_t block_rows(int64_t row_len) { return std::max<int64_t>(1, (int64_t{1} << 22) / std::max<int64_t>(row_len, 1)); }

// The input element tap (r, s) of output pixel (p, q) reads, or −1 outside the image.
struct Tap {
  const ConvShape& s;
  [[nodiscard]] int64_t row(int64_t p, int64_t r) const { return p * s.stride - s.pad + r * s.dilation; }
  [[nodiscard]] int64_t col(int64_t q, int64_t t) const { return q * s.stride - s.pad + t * s.dilation; }
  [[nodiscard]] int64_t at(int64_t n, int64_t p, int64_t q, int64_t r, int64_t t) const {
    const int64_t h = row(p, r), w = col(q, t);
    if (h < 0 || h >= s.height || w < 0 || w >= s.width) return -1;
    return ((n * s.height + h) * s.width + w) * s.channels;
  }
};

// Rows [m0, m0 + rows) of group g's unfolded input (pixel m = (n·out_h + p)·out_w + q), each
// kernel_h·kernel_w·(channels / groups) floats in (r, s, c) order, zeros outside the image.
template <class T>
void unfold(const T* x, const ConvShape& s, int64_t g, int64_t m0, int64_t rows, float* col) {
  const int64_t cg = s.channels / s.groups, len = s.kernel_h * s.kernel_w * cg;
  const Tap tap{s};
  parallel_for(rows, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t m = m0 + i, q = m % s.out_w, p = (m / s.out_w) % s.out_h, n = m / (s.out_w * s.out_h);
      float* row = col + i * len;
      for (int64_t r = 0; r < s.kernel_h; ++r)
        for (int64_t t = 0; t < s.kernel_w; ++t) {
          float* dst = row + (r * s.kernel_w + t) * cg;
          const int64_t off = tap.at(n, p, q, r, t);
          if (off < 0) {
            std::fill(dst, dst + cg, 0.0f);
          } else {
            const T* src = x + off + g * cg;
            for (int64_t c = 0; c < cg; ++c) dst[c] = to_f32(src[c]);
          }
        }
    }
  });
}

// The filters of every group as fp32 [filters, kernel_h·kernel_w·(channels / groups)].
template <class T>
std::vector<float> filters_f32(const T* w, const ConvShape& s) {
  std::vector<float> out(static_cast<std::size_t>(s.w_elements()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = to_f32(w[i]);
  return out;
}

}  // namespace

template <class T>
void conv2d(const T* x, const T* w, const T* bias, T* y, const ConvShape& s) {
  const int64_t cg = s.channels / s.groups, kg = s.filters / s.groups, len = s.kernel_h * s.kernel_w * cg;
  const int64_t pixels = s.batch * s.out_h * s.out_w, step = block_rows(len);
  const std::vector<float> wf = filters_f32(w, s);
  std::vector<float> col(static_cast<std::size_t>(std::min(step, pixels) * len));
  std::vector<float> out(static_cast<std::size_t>(std::min(step, pixels) * s.filters));
  std::vector<float> b(static_cast<std::size_t>(s.filters), 0.0f);  // the epilogue's bias
  if (bias != nullptr)
    for (int64_t k = 0; k < s.filters; ++k) b[static_cast<std::size_t>(k)] = to_f32(bias[k]);
  const float floor = s.relu ? 0.0f : -std::numeric_limits<float>::infinity();
  for (int64_t m0 = 0; m0 < pixels; m0 += step) {
    const int64_t rows = std::min(step, pixels - m0);
    for (int64_t g = 0; g < s.groups; ++g) {
      unfold(x, s, g, m0, rows, col.data());
      // out[:, g·kg ..] = col · W_g^T, W_g = rows g·kg .. of the filters.
      blas::sgemm(false, true, rows, kg, len, 1.0f, col.data(), len, wf.data() + g * kg * len, len, 0.0f,
                  out.data() + g * kg, s.filters);
    }
    // The epilogue: the bias, then the ReLU of a folded conv+BN+ReLU.
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = out.data() + r * s.filters;
      T* dst = y + (m0 + r) * s.filters;
      for (int64_t k = 0; k < s.filters; ++k)
        dst[k] = from_f32<T>(std::max(src[k] + b[static_cast<std::size_t>(k)], floor));
    }
  }
}

template <class T>
void conv2d_dgrad(const T* dy, const T* w, T* dx, const ConvShape& s) {
  const int64_t cg = s.channels / s.groups, kg = s.filters / s.groups, len = s.kernel_h * s.kernel_w * cg;
  const int64_t per_image = s.out_h * s.out_w;
  // Whole images a block, so folding a block back touches only its own images' pixels.
  const int64_t images = std::max<int64_t>(1, block_rows(len) / std::max<int64_t>(per_image, 1));
  const std::vector<float> wf = filters_f32(w, s);
  std::vector<float> acc(static_cast<std::size_t>(s.x_elements()), 0.0f);
  std::vector<float> dyf(static_cast<std::size_t>(std::min(images, s.batch) * per_image * s.filters));
  std::vector<float> dcol(static_cast<std::size_t>(std::min(images, s.batch) * per_image * len));
  const Tap tap{s};
  for (int64_t n0 = 0; n0 < s.batch; n0 += images) {
    const int64_t nb = std::min(images, s.batch - n0), rows = nb * per_image;
    for (int64_t i = 0; i < rows * s.filters; ++i) dyf[static_cast<std::size_t>(i)] = to_f32(dy[n0 * per_image * s.filters + i]);
    for (int64_t g = 0; g < s.groups; ++g) {
      // dcol = dy_g · W_g: each pixel's window gradient.
      blas::sgemm(false, false, rows, len, kg, 1.0f, dyf.data() + g * kg, s.filters, wf.data() + g * kg * len, len,
                  0.0f, dcol.data(), len);
      // Fold: image by image in parallel (windows of one image overlap, of two never).
      parallel_for(nb, 1, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j)
          for (int64_t p = 0; p < s.out_h; ++p)
            for (int64_t q = 0; q < s.out_w; ++q) {
              const float* row = dcol.data() + ((j * s.out_h + p) * s.out_w + q) * len;
              for (int64_t r = 0; r < s.kernel_h; ++r)
                for (int64_t t = 0; t < s.kernel_w; ++t) {
                  const int64_t off = tap.at(n0 + j, p, q, r, t);
                  if (off < 0) continue;
                  float* dst = acc.data() + off + g * cg;
                  const float* src = row + (r * s.kernel_w + t) * cg;
                  for (int64_t c = 0; c < cg; ++c) dst[c] += src[c];
                }
            }
      });
    }
  }
  for (int64_t i = 0; i < s.x_elements(); ++i) dx[i] = from_f32<T>(acc[static_cast<std::size_t>(i)]);
}

template <class T>
void conv2d_wgrad(const T* x, const T* dy, T* dw, const ConvShape& s) {
  const int64_t cg = s.channels / s.groups, kg = s.filters / s.groups, len = s.kernel_h * s.kernel_w * cg;
  const int64_t pixels = s.batch * s.out_h * s.out_w, step = block_rows(len);
  std::vector<float> acc(static_cast<std::size_t>(s.w_elements()), 0.0f);
  std::vector<float> col(static_cast<std::size_t>(std::min(step, pixels) * len));
  std::vector<float> dyf(static_cast<std::size_t>(std::min(step, pixels) * s.filters));
  for (int64_t m0 = 0; m0 < pixels; m0 += step) {
    const int64_t rows = std::min(step, pixels - m0);
    for (int64_t i = 0; i < rows * s.filters; ++i) dyf[static_cast<std::size_t>(i)] = to_f32(dy[m0 * s.filters + i]);
    for (int64_t g = 0; g < s.groups; ++g) {
      unfold(x, s, g, m0, rows, col.data());
      // dW_g += dy_g^T · col, summed over the blocks of pixels.
      blas::sgemm(true, false, kg, len, rows, 1.0f, dyf.data() + g * kg, s.filters, col.data(), len, 1.0f,
                  acc.data() + g * kg * len, len);
    }
  }
  for (int64_t i = 0; i < s.w_elements(); ++i) dw[i] = from_f32<T>(acc[static_cast<std::size_t>(i)]);
}

#define PERFSIM_INSTANTIATE_CONV(T)                                       \
  template void conv2d<T>(const T*, const T*, const T*, T*, const ConvShape&); \
  template void conv2d_dgrad<T>(const T*, const T*, T*, const ConvShape&); \
  template void conv2d_wgrad<T>(const T*, const T*, T*, const ConvShape&);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_CONV)

}  // namespace perfsim::cpu
