// Softmax cross-entropy over the vocabulary for each row of logits, with the gradient of
// the mean loss folded in (as llm.c's fused classifier does), so logits are read once more
// rather than a probability tensor being materialized.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"

namespace perfsim::cpu {

template <class T>
void cross_entropy(const T* logits, const int32_t* targets, float* loss,
                   std::type_identity_t<T>* dlogits, int64_t rows,
                   int64_t cols, int64_t mean_rows) {
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] < 0 || targets[r] >= cols)
      throw std::out_of_range(fmt::format("cross_entropy: row {} has target {} outside [0, {})", r,
                                          targets[r], cols));
  const float inv_rows = 1.0f / static_cast<float>(mean_rows > 0 ? mean_rows : rows);
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
    float* xb = detail::thread_scratch(0, static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = detail::as_float(logits + r * cols, cols, xb);
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, x[c]);
      float sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(x[c] - mx);
      const float lse = mx + std::log(sum);
      const int64_t target = targets[r];
      loss[r] = lse - x[target];
      if (dlogits == nullptr) continue;
      T* g = dlogits + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const float p = std::exp(x[c] - lse);
        g[c] = from_f32<T>((p - (c == target ? 1.0f : 0.0f)) * inv_rows);
      }
    }
  });
}

#define PERFSIM_INSTANTIATE_LOSS(T) \
  template void cross_entropy<T>(const T*, const int32_t*, float*, T*, int64_t, int64_t, int64_t);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_LOSS)

}  // namespace perfsim::cpu
