// Mixture-of-experts routing (top-k softmax router, slots in token order) and the row moves
// between token order and the experts' buffers. Buffer rows are filled from an inverse map
// (row -> the choice that fills it) and token rows from their own choices, so every output
// element has one writer and sums run in choice order: results do not depend on threads.
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"

namespace perfsim::cpu {

namespace {

int64_t choices(const MoeShape& s) { return s.tokens * s.top_k; }

// Tokens per parallel chunk: about 16 K elements of work.
int64_t token_grain(int64_t per_token) {
  return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(per_token, 1));
}

void check_experts(const int32_t* experts, const MoeShape& s) {
  for (int64_t i = 0; i < choices(s); ++i)
    if (experts[i] < 0 || experts[i] >= s.experts)
      throw std::out_of_range(fmt::format("moe: choice {} of token {} names expert {} outside [0, {})", i % s.top_k,
                                          i / s.top_k, experts[i], s.experts));
}

// The buffer row (e·capacity + slot) a choice fills, or −1 when it was dropped.
int64_t buffer_row(const int32_t* experts, const int32_t* slots, int64_t i, const MoeShape& s) {
  return slots[i] < 0 ? -1 : int64_t{experts[i]} * s.capacity + slots[i];
}

// For each of the experts·capacity buffer rows, the choice that fills it (−1: none), after
// checking that every choice is in range and no row is named twice.
std::vector<int64_t> filled_by(const int32_t* experts, const int32_t* slots, const MoeShape& s) {
  check_experts(experts, s);
  std::vector<int64_t> source(static_cast<std::size_t>(s.experts * s.capacity), -1);
  for (int64_t i = 0; i < choices(s); ++i) {
    if (slots[i] < -1 || slots[i] >= s.capacity)
      throw std::out_of_range(fmt::format("moe: choice {} of token {} has slot {} outside [-1, {})", i % s.top_k,
                                          i / s.top_k, slots[i], s.capacity));
    const int64_t row = buffer_row(experts, slots, i, s);
    if (row < 0) continue;
    int64_t& src = source[static_cast<std::size_t>(row)];
    if (src >= 0)
      throw std::invalid_argument(fmt::format("moe: tokens {} and {} both fill slot {} of expert {}", src / s.top_k,
                                              i / s.top_k, slots[i], experts[i]));
    src = i;
  }
  return source;
}

// Whether logit a of expert ai ranks above logit b of expert bi: the larger, the lower expert
// on ties, NaN below every number (the CUDA router ranks alike).
bool ranks_above(float a, int64_t ai, float b, int64_t bi) {
  if (std::isnan(a) != std::isnan(b)) return std::isnan(b);
  if (!std::isnan(a) && a != b) return a > b;
  return ai < bi;
}

// Softmax of the chosen logits of token t into w[0, top_k).
template <class T>
void chosen_softmax(const T* logits, const int32_t* experts, int64_t t, const MoeShape& s, float* w) {
  const T* row = logits + t * s.experts;
  const int32_t* ex = experts + t * s.top_k;
  float mx = -INFINITY;
  for (int64_t j = 0; j < s.top_k; ++j) mx = std::max(mx, to_f32(row[ex[j]]));
  float sum = 0;
  for (int64_t j = 0; j < s.top_k; ++j) sum += w[j] = std::exp(to_f32(row[ex[j]]) - mx);
  for (int64_t j = 0; j < s.top_k; ++j) w[j] /= sum;
}

}  // namespace

template <class T>
void moe_route(const T* logits, float* weights, int32_t* experts, int32_t* slots, const MoeShape& s) {
  if (s.top_k > s.experts)
    throw std::invalid_argument(fmt::format("moe_route: top_k {} exceeds the {} experts", s.top_k, s.experts));
  parallel_for(s.tokens, token_grain(s.experts * s.top_k), [&](int64_t t0, int64_t t1) {
    float* buf = detail::thread_scratch(0, static_cast<std::size_t>(s.experts));
    for (int64_t t = t0; t < t1; ++t) {
      const float* x = detail::as_float(logits + t * s.experts, s.experts, buf);
      int32_t* ex = experts + t * s.top_k;
      // k selection sweeps: the highest-ranked logit not yet picked.
      for (int64_t j = 0; j < s.top_k; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < s.experts; ++e) {
          if (std::find(ex, ex + j, static_cast<int32_t>(e)) != ex + j) continue;
          if (best < 0 || ranks_above(x[e], e, x[best], best)) best = e;
        }
        ex[j] = static_cast<int32_t>(best);
      }
      chosen_softmax(logits, experts, t, s, weights + t * s.top_k);
    }
  });
  // Slots in choice order (t, then j): a sequential count per expert.
  std::vector<int64_t> held(static_cast<std::size_t>(s.experts), 0);
  for (int64_t i = 0; i < choices(s); ++i) {
    int64_t& n = held[static_cast<std::size_t>(experts[i])];
    slots[i] = n < s.capacity ? static_cast<int32_t>(n) : -1;
    ++n;
  }
}

template <class T>
void moe_route_bwd(const T* logits, const int32_t* experts, const float* dweights, float* dlogits,
                   const MoeShape& s) {
  check_experts(experts, s);
  parallel_for(s.tokens, token_grain(s.experts), [&](int64_t t0, int64_t t1) {
    float* w = detail::thread_scratch(0, static_cast<std::size_t>(s.top_k));
    for (int64_t t = t0; t < t1; ++t) {
      chosen_softmax(logits, experts, t, s, w);
      const float* dw = dweights + t * s.top_k;
      float wdw = 0;
      for (int64_t j = 0; j < s.top_k; ++j) wdw += w[j] * dw[j];
      float* g = dlogits + t * s.experts;
      std::fill(g, g + s.experts, 0.0f);
      // += : an expert listed twice gets both terms, the derivative of the softmax as listed.
      for (int64_t j = 0; j < s.top_k; ++j) g[experts[t * s.top_k + j]] += w[j] * (dw[j] - wdw);
    }
  });
}

template <class T>
void moe_dispatch(const T* x, const int32_t* experts, const int32_t* slots, T* xe, const MoeShape& s) {
  const std::vector<int64_t> source = filled_by(experts, slots, s);
  const int64_t h = s.hidden;
  parallel_for(s.experts * s.capacity, token_grain(h), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t src = source[static_cast<std::size_t>(r)];
      T* out = xe + r * h;
      if (src < 0) std::fill(out, out + h, from_f32<T>(0.0f));
      else std::copy(x + (src / s.top_k) * h, x + (src / s.top_k + 1) * h, out);
    }
  });
}

template <class T>
void moe_dispatch_bwd(const T* dxe, const int32_t* experts, const int32_t* slots, T* dx, const MoeShape& s) {
  (void)filled_by(experts, slots, s);
  const int64_t h = s.hidden;
  const float unscale = 1.0f / s.expert_grad_scale;
  parallel_for(s.tokens, token_grain(h * s.top_k), [&](int64_t t0, int64_t t1) {
    float* acc = detail::thread_scratch(0, static_cast<std::size_t>(h));
    for (int64_t t = t0; t < t1; ++t) {
      std::fill(acc, acc + h, 0.0f);
      for (int64_t i = t * s.top_k; i < (t + 1) * s.top_k; ++i) {
        const int64_t row = buffer_row(experts, slots, i, s);
        if (row < 0) continue;
        const T* g = dxe + row * h;
        for (int64_t c = 0; c < h; ++c) acc[c] += to_f32(g[c]);
      }
      if (unscale != 1.0f)
        for (int64_t c = 0; c < h; ++c) acc[c] *= unscale;
      detail::store_rows(acc, 1, h, dx + t * h, h);
    }
  });
}

template <class T>
void moe_combine(const T* ye, const int32_t* experts, const int32_t* slots, const float* weights, T* y,
                 const MoeShape& s) {
  (void)filled_by(experts, slots, s);
  const int64_t h = s.hidden;
  parallel_for(s.tokens, token_grain(h * s.top_k), [&](int64_t t0, int64_t t1) {
    float* acc = detail::thread_scratch(0, static_cast<std::size_t>(h));
    for (int64_t t = t0; t < t1; ++t) {
      std::fill(acc, acc + h, 0.0f);
      for (int64_t i = t * s.top_k; i < (t + 1) * s.top_k; ++i) {
        const int64_t row = buffer_row(experts, slots, i, s);
        if (row < 0) continue;
        const T* e = ye + row * h;
        for (int64_t c = 0; c < h; ++c) acc[c] += weights[i] * to_f32(e[c]);
      }
      detail::store_rows(acc, 1, h, y + t * h, h);
    }
  });
}

template <class T>
void moe_combine_bwd(const T* dy, const T* ye, const int32_t* experts, const int32_t* slots, const float* weights,
                     T* dye, float* dweights, const MoeShape& s) {
  const std::vector<int64_t> source = filled_by(experts, slots, s);
  const int64_t h = s.hidden;
  parallel_for(s.experts * s.capacity, token_grain(h), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t src = source[static_cast<std::size_t>(r)];
      T* out = dye + r * h;
      if (src < 0) {
        std::fill(out, out + h, from_f32<T>(0.0f));
        continue;
      }
      const T* g = dy + (src / s.top_k) * h;
      const float w = s.expert_grad_scale * weights[src];
      for (int64_t c = 0; c < h; ++c) out[c] = from_f32<T>(w * to_f32(g[c]));
    }
  });
  parallel_for(s.tokens, token_grain(h * s.top_k), [&](int64_t t0, int64_t t1) {
    float* gbuf = detail::thread_scratch(0, static_cast<std::size_t>(h));
    float* ebuf = detail::thread_scratch(1, static_cast<std::size_t>(h));
    for (int64_t t = t0; t < t1; ++t) {
      const float* g = detail::as_float(dy + t * h, h, gbuf);
      for (int64_t i = t * s.top_k; i < (t + 1) * s.top_k; ++i) {
        const int64_t row = buffer_row(experts, slots, i, s);
        dweights[i] = row < 0 ? 0.0f : detail::dot(g, detail::as_float(ye + row * h, h, ebuf), h);
      }
    }
  });
}

#define PERFSIM_INSTANTIATE_MOE(T)                                                                        \
  template void moe_route<T>(const T*, float*, int32_t*, int32_t*, const MoeShape&);                      \
  template void moe_route_bwd<T>(const T*, const int32_t*, const float*, float*, const MoeShape&);         \
  template void moe_dispatch<T>(const T*, const int32_t*, const int32_t*, T*, const MoeShape&);           \
  template void moe_dispatch_bwd<T>(const T*, const int32_t*, const int32_t*, T*, const MoeShape&);       \
  template void moe_combine<T>(const T*, const int32_t*, const int32_t*, const float*, T*, const MoeShape&); \
  template void moe_combine_bwd<T>(const T*, const T*, const int32_t*, const int32_t*, const float*, T*,  \
                                   float*, const MoeShape&);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_MOE)

}  // namespace perfsim::cpu
