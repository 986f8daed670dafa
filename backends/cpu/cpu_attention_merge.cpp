// Joining two attention outputs over disjoint keys by their log-sum-exps, the online-softmax
// correction of ring attention (see attn_merge in cpu_kernels.hpp). Each (sequence, query row,
// head) is independent: one weight pair, then one pass over head_dim.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"

namespace perfsim::cpu {

template <class T>
void attn_merge(const T* o_a, const float* lse_a, const T* o_b, const float* lse_b, T* o, float* lse,
                const AttnShape& a) {
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t d = a.head_dim;
  parallel_for(a.batch * a.seq_q, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / a.seq_q, i = r % a.seq_q;
      for (int64_t h = 0; h < a.heads; ++h) {
        const int64_t l = (b * a.heads + h) * a.seq_q + i;  // LSE [b, h, seq_q]
        const int64_t x = (r * a.heads + h) * d;            // O [b, seq_q, h, d]
        const float la = lse_a[l], lb = lse_b[l];
        const float m = std::max(la, lb);
        if (m == neg_inf) {  // neither block saw a key of this row
          lse[l] = neg_inf;
          for (int64_t c = 0; c < d; ++c) o[x + c] = from_f32<T>(0.0f);
          continue;
        }
        const float ea = std::exp(la - m), eb = std::exp(lb - m), sum = ea + eb;
        lse[l] = m + std::log(sum);
        const float wa = ea / sum, wb = eb / sum;
        for (int64_t c = 0; c < d; ++c)
          o[x + c] = from_f32<T>(wa * to_f32(o_a[x + c]) + wb * to_f32(o_b[x + c]));
      }
    }
  });
}

#define PERFSIM_INSTANTIATE_MERGE(T) \
  template void attn_merge<T>(const T*, const float*, const T*, const float*, T*, float*, const AttnShape&);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_MERGE)

}  // namespace perfsim::cpu
