// Pooling over NHWC images: max and average over each window of ConvShape (filters =
// channels), and their backward passes. Padding never takes part: a max is over the window's
// in-bounds elements, a mean divides by their count (PyTorch's count_include_pad = False; a
// window of the whole image is global average pooling). The max backward sends dy to each
// window's first maximum in (row, column) order, as the forward found it.
#include <algorithm>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"

namespace perfsim::cpu {

namespace {

// The in-bounds window of output (p, q): rows [h0, h1), columns [w0, w1) of the image.
struct Window {
  int64_t h0, h1, w0, w1;
  [[nodiscard]] int64_t count() const { return (h1 - h0) * (w1 - w0); }
};
Window window(const ConvShape& s, int64_t p, int64_t q) {
  const int64_t h = p * s.stride - s.pad, w = q * s.stride - s.pad;
  return {std::max<int64_t>(h, 0), std::min(h + s.kernel_h, s.height), std::max<int64_t>(w, 0),
          std::min(w + s.kernel_w, s.width)};
}

// Calls f(n, p, q, window) for every output pixel, images in parallel.
template <class F>
void for_outputs(const ConvShape& s, F f) {
  parallel_for(s.batch, 1, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n)
      for (int64_t p = 0; p < s.out_h; ++p)
        for (int64_t q = 0; q < s.out_w; ++q) f(n, p, q, window(s, p, q));
  });
}

int64_t pixel(const ConvShape& s, int64_t n, int64_t h, int64_t w) { return ((n * s.height + h) * s.width + w) * s.channels; }
int64_t out_pixel(const ConvShape& s, int64_t n, int64_t p, int64_t q) {
  return ((n * s.out_h + p) * s.out_w + q) * s.channels;
}

}  // namespace

template <class T>
void maxpool(const T* x, T* y, const ConvShape& s) {
  for_outputs(s, [&](int64_t n, int64_t p, int64_t q, const Window& win) {
    T* out = y + out_pixel(s, n, p, q);
    for (int64_t c = 0; c < s.channels; ++c) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w) m = std::max(m, to_f32(x[pixel(s, n, h, w) + c]));
      out[c] = from_f32<T>(m);
    }
  });
}

template <class T>
void maxpool_bwd(const T* x, const T* dy, T* dx, const ConvShape& s) {
  std::vector<float> acc(static_cast<std::size_t>(s.x_elements()), 0.0f);
  for_outputs(s, [&](int64_t n, int64_t p, int64_t q, const Window& win) {
    const T* g = dy + out_pixel(s, n, p, q);
    for (int64_t c = 0; c < s.channels; ++c) {
      float m = -std::numeric_limits<float>::infinity();
      int64_t at = -1;
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w) {
          const int64_t i = pixel(s, n, h, w) + c;
          if (const float v = to_f32(x[i]); at < 0 || v > m) m = v, at = i;
        }
      if (at >= 0) acc[static_cast<std::size_t>(at)] += to_f32(g[c]);
    }
  });
  for (int64_t i = 0; i < s.x_elements(); ++i) dx[i] = from_f32<T>(acc[static_cast<std::size_t>(i)]);
}

template <class T>
void avgpool(const T* x, T* y, const ConvShape& s) {
  for_outputs(s, [&](int64_t n, int64_t p, int64_t q, const Window& win) {
    T* out = y + out_pixel(s, n, p, q);
    const float inv = 1.0f / static_cast<float>(std::max<int64_t>(win.count(), 1));
    for (int64_t c = 0; c < s.channels; ++c) {
      float sum = 0.0f;
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w) sum += to_f32(x[pixel(s, n, h, w) + c]);
      out[c] = from_f32<T>(sum * inv);
    }
  });
}

template <class T>
void avgpool_bwd(const T* dy, T* dx, const ConvShape& s) {
  std::vector<float> acc(static_cast<std::size_t>(s.x_elements()), 0.0f);
  for_outputs(s, [&](int64_t n, int64_t p, int64_t q, const Window& win) {
    const T* g = dy + out_pixel(s, n, p, q);
    const float inv = 1.0f / static_cast<float>(std::max<int64_t>(win.count(), 1));
    for (int64_t h = win.h0; h < win.h1; ++h)
      for (int64_t w = win.w0; w < win.w1; ++w) {
        float* dst = acc.data() + pixel(s, n, h, w);
        for (int64_t c = 0; c < s.channels; ++c) dst[c] += to_f32(g[c]) * inv;
      }
  });
  for (int64_t i = 0; i < s.x_elements(); ++i) dx[i] = from_f32<T>(acc[static_cast<std::size_t>(i)]);
}

#define PERFSIM_INSTANTIATE_POOL(T)                                         \
  template void maxpool<T>(const T*, T*, const ConvShape&);                  \
  template void maxpool_bwd<T>(const T*, const T*, T*, const ConvShape&);    \
  template void avgpool<T>(const T*, T*, const ConvShape&);                  \
  template void avgpool_bwd<T>(const T*, T*, const ConvShape&);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_POOL)

}  // namespace perfsim::cpu
