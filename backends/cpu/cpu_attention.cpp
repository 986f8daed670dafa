// Materialized attention and its backward: scores S = Q·K^T·scale, softmax P (causal mask),
// context O = P·V, and the three backward ops. Shapes in cpu_kernels.hpp (AttnShape):
// Q, O [b, sq, h, d]; K, V [b, cap, kvh, d]; S, P [b, h, sq, skv]; dK, dV [b, gcap, kvh, d].
// Three loops cover five of the six ops (dot products with K/V rows, weighted sums of K/V rows,
// sums onto K/V rows). fp32 runs each (batch, head) slice as an OpenBLAS sgemm with strided
// operands; bf16/fp16 use float-accumulating loops parallel over rows, where dK/dV rows are
// owned by one (batch, kv head, kv position) each, summing the query heads of the GQA group.
// With ALiBi the softmax adds each head's linear bias to S as it reads it (core/graph/alibi.hpp);
// S itself stays Q·K^T·scale, and the backward needs nothing more than P.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"
#include "core/graph/alibi.hpp"

namespace perfsim::cpu {

using detail::axpy;
using detail::dot;
using detail::thread_scratch;

namespace {

// Rows of work per parallel chunk, sized so a chunk holds roughly 32k multiply-adds.
int64_t grain_for(int64_t work_per_row) {
  return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(work_per_row, 1));
}

// Element offsets into Q/O and K/V for (batch, query or kv row, head).
struct Strides {
  explicit Strides(const AttnShape& shape) : a(shape) {}
  const AttnShape& a;
  [[nodiscard]] int64_t q(int64_t b, int64_t i, int64_t h) const {
    return ((b * a.seq_q + i) * a.heads + h) * a.head_dim;
  }
  [[nodiscard]] int64_t kv(int64_t b, int64_t j, int64_t kh) const {
    return ((b * a.kv_capacity + j) * a.kv_heads + kh) * a.head_dim;
  }
  [[nodiscard]] int64_t grad_kv(int64_t b, int64_t j, int64_t kh) const {
    return ((b * a.grad_capacity + j) * a.kv_heads + kh) * a.head_dim;
  }
  [[nodiscard]] int64_t s(int64_t b, int64_t h, int64_t i) const {
    return ((b * a.heads + h) * a.seq_q + i) * a.seq_kv;
  }
};

// Splits a flat score-row index into (batch, head, query row).
struct RowIndex {
  int64_t b, h, i;
};
RowIndex split_row(const AttnShape& a, int64_t r) {
  return {r / (a.heads * a.seq_q), (r / a.seq_q) % a.heads, r % a.seq_q};
}

// fp32 fast paths: one sgemm per (batch, head) on strided views of Q/K/V/O (backends/cpu/blas).
namespace strided {

// out[b, j, kh, :] = alpha · Σ_{h in group(kh)} W[b,h]^T · X[b,:,h,:] for j < seq_kv; zero rows
// seq_kv .. grad_capacity. W is score-shaped (P or dS), X query-shaped (dO or Q).
void reduce_to_kv(const float* w, const float* x, float* out, float alpha, const AttnShape& a) {
  const Strides st(a);
  const int64_t d = a.head_dim, g = a.group();
  // (batch, kv head) slices own their rows of out: in parallel, each product on its thread.
  parallel_for(a.batch * a.kv_heads, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t bk = s0; bk < s1; ++bk) {
      const int64_t b = bk / a.kv_heads, kh = bk % a.kv_heads;
      for (int64_t h = kh * g; h < (kh + 1) * g; ++h)
        blas::sgemm(true, false, a.seq_kv, d, a.seq_q, alpha, w + st.s(b, h, 0), a.seq_kv, x + st.q(b, 0, h),
                    a.heads * d, h == kh * g ? 0.0f : 1.0f, out + st.grad_kv(b, 0, kh), a.kv_heads * d);
      for (int64_t j = a.seq_kv; j < a.grad_capacity; ++j)
        std::memset(out + st.grad_kv(b, j, kh), 0, static_cast<std::size_t>(d) * sizeof(float));
    }
  });
}

}  // namespace strided

// out[b, h, i, j] = scale · X[b, i, h, :] · KV[b, j, kh, :] for every j < seq_kv: the scores
// (X = Q, KV = K) and dP (X = dO, KV = V). X query-shaped, out score-shaped.
template <class T>
void rows_dot_kv(const T* x, const T* kv, T* out, float scale, const AttnShape& a) {
  const Strides st(a);
  const int64_t d = a.head_dim;
  if constexpr (std::is_same_v<T, float>) {
    // Slices in parallel, each product on its thread (blas::sgemm runs inline inside a chunk).
    parallel_for(a.batch * a.heads, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t bh = s0; bh < s1; ++bh) {
        const int64_t b = bh / a.heads, h = bh % a.heads;
        blas::sgemm(false, true, a.seq_q, a.seq_kv, d, scale, x + st.q(b, 0, h), a.heads * d,
                    kv + st.kv(b, 0, h / a.group()), a.kv_heads * d, 0.0f, out + st.s(b, h, 0), a.seq_kv);
      }
    });
    return;
  }
  parallel_for(a.batch * a.heads * a.seq_q, grain_for(a.seq_kv * d), [&](int64_t r0, int64_t r1) {
    float* xf = thread_scratch(0, static_cast<std::size_t>(d));
    float* kf = thread_scratch(1, static_cast<std::size_t>(d));
    for (int64_t r = r0; r < r1; ++r) {
      const auto [b, h, i] = split_row(a, r);
      const int64_t kh = h / a.group();
      const float* xr = detail::as_float(x + st.q(b, i, h), d, xf);
      T* row = out + st.s(b, h, i);
      for (int64_t j = 0; j < a.seq_kv; ++j)
        row[j] = from_f32<T>(dot(xr, detail::as_float(kv + st.kv(b, j, kh), d, kf), d) * scale);
    }
  });
}

// out[b, i, h, :] = scale · Σ_j W[b, h, i, j] · KV[b, j, kh, :]: the context (W = P, KV = V)
// and dQ (W = dS, KV = K). W score-shaped, out query-shaped.
template <class T>
void rows_times_kv(const T* w, const T* kv, T* out, float scale, const AttnShape& a) {
  const Strides st(a);
  const int64_t d = a.head_dim;
  if constexpr (std::is_same_v<T, float>) {
    parallel_for(a.batch * a.heads, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t bh = s0; bh < s1; ++bh) {
        const int64_t b = bh / a.heads, h = bh % a.heads;
        blas::sgemm(false, false, a.seq_q, d, a.seq_kv, scale, w + st.s(b, h, 0), a.seq_kv,
                    kv + st.kv(b, 0, h / a.group()), a.kv_heads * d, 0.0f, out + st.q(b, 0, h), a.heads * d);
      }
    });
    return;
  }
  parallel_for(a.batch * a.heads * a.seq_q, grain_for(a.seq_kv * d), [&](int64_t r0, int64_t r1) {
    float* acc = thread_scratch(0, static_cast<std::size_t>(d));
    float* kf = thread_scratch(1, static_cast<std::size_t>(d));
    for (int64_t r = r0; r < r1; ++r) {
      const auto [b, h, i] = split_row(a, r);
      const int64_t kh = h / a.group();
      const T* row = w + st.s(b, h, i);
      std::fill(acc, acc + d, 0.0f);
      for (int64_t j = 0; j < a.seq_kv; ++j) {
        const float wj = to_f32(row[j]);
        if (wj == 0.0f) continue;  // masked or underflowed: contributes nothing
        axpy(wj * scale, detail::as_float(kv + st.kv(b, j, kh), d, kf), acc, d);
      }
      detail::store_rows(acc, 1, d, out + st.q(b, i, h), 0);
    }
  });
}

// out[b, j, kh, :] = scale · Σ_{h in group(kh)} Σ_i W[b, h, i, j] · X[b, i, h, :] for j < skv,
// 0 for skv <= j < grad_capacity: dV (W = P, X = dO) and dK (W = dS, X = Q).
template <class T>
void reduce_to_kv(const T* w, const T* x, T* out, float scale, const AttnShape& a) {
  if constexpr (std::is_same_v<T, float>) {
    strided::reduce_to_kv(w, x, out, scale, a);
    return;
  }
  const Strides st(a);
  const int64_t d = a.head_dim;
  const int64_t g = a.group();
  parallel_for(a.batch * a.kv_heads * a.grad_capacity, grain_for(g * a.seq_q * d),
               [&](int64_t r0, int64_t r1) {
    float* acc = thread_scratch(0, static_cast<std::size_t>(d));
    float* xf = thread_scratch(1, static_cast<std::size_t>(d));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (a.kv_heads * a.grad_capacity);
      const int64_t j = (r / a.kv_heads) % a.grad_capacity;
      const int64_t kh = r % a.kv_heads;
      std::fill(acc, acc + d, 0.0f);
      if (j < a.seq_kv) {
        for (int64_t h = kh * g; h < (kh + 1) * g; ++h)
          for (int64_t i = 0; i < a.seq_q; ++i) {
            const float wij = to_f32(w[st.s(b, h, i) + j]);
            if (wij == 0.0f) continue;
            axpy(wij * scale, detail::as_float(x + st.q(b, i, h), d, xf), acc, d);
          }
      }
      detail::store_rows(acc, 1, d, out + st.grad_kv(b, j, kh), 0);
    }
  });
}

}  // namespace

template <class T>
void attn_scores(const T* q, const T* k, T* s, const AttnShape& a) {
  rows_dot_kv(q, k, s, a.scale(), a);
}

template <class T>
void attn_softmax(const T* s, T* p, const AttnShape& a) {
  const Strides st(a);
  parallel_for(a.batch * a.heads * a.seq_q, grain_for(a.seq_kv * 4), [&](int64_t r0, int64_t r1) {
    float* e = thread_scratch(0, static_cast<std::size_t>(a.seq_kv));
    for (int64_t r = r0; r < r1; ++r) {
      const auto [b, h, i] = split_row(a, r);
      const T* srow = s + st.s(b, h, i);
      T* prow = p + st.s(b, h, i);
      const int64_t vis = a.visible(i);
      // Query row i sits at position seq_kv − seq_q + i, as the causal mask places it.
      const double slope = a.alibi_heads > 0 ? alibi_slope(h, a.alibi_heads) : 0.0;
      const int64_t pos = a.seq_kv - a.seq_q + i;
      for (int64_t j = 0; j < vis; ++j)
        e[j] = to_f32(srow[j]) + (slope != 0 ? static_cast<float>(alibi_bias(slope, pos, j)) : 0.0f);
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < vis; ++j) mx = std::max(mx, e[j]);
      float sum = 0;
      for (int64_t j = 0; j < vis; ++j) {
        e[j] = std::exp(e[j] - mx);
        sum += e[j];
      }
      const float inv = sum > 0 ? 1.0f / sum : 0.0f;
      for (int64_t j = 0; j < vis; ++j) prow[j] = from_f32<T>(e[j] * inv);
      for (int64_t j = vis; j < a.seq_kv; ++j) prow[j] = from_f32<T>(0.0f);
    }
  });
}

template <class T>
void attn_context(const T* p, const T* v, T* o, const AttnShape& a) {
  rows_times_kv(p, v, o, 1.0f, a);
}

template <class T>
void attn_context_bwd(const T* d_o, const T* p, const T* v, T* dp, T* dv, const AttnShape& a) {
  rows_dot_kv(d_o, v, dp, 1.0f, a);  // dP = dO · V^T
  reduce_to_kv(p, d_o, dv, 1.0f, a); // dV = P^T · dO
}

template <class T>
void attn_softmax_bwd(const T* p, const T* dp, T* ds, const AttnShape& a) {
  const Strides st(a);
  parallel_for(a.batch * a.heads * a.seq_q, grain_for(a.seq_kv * 3), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const auto [b, h, i] = split_row(a, r);
      const int64_t off = st.s(b, h, i);
      float rowdot = 0;
      for (int64_t j = 0; j < a.seq_kv; ++j) rowdot += to_f32(p[off + j]) * to_f32(dp[off + j]);
      for (int64_t j = 0; j < a.seq_kv; ++j)
        ds[off + j] = from_f32<T>(to_f32(p[off + j]) * (to_f32(dp[off + j]) - rowdot));
    }
  });
}

template <class T>
void attn_scores_bwd(const T* ds, const T* q, const T* k, T* dq, T* dk, const AttnShape& a) {
  const float scale = a.scale();
  rows_times_kv(ds, k, dq, scale, a);  // dQ = scale · dS · K
  reduce_to_kv(ds, q, dk, scale, a);   // dK = scale · dS^T · Q
}

#define PERFSIM_INSTANTIATE_ATTENTION(T)                                                   \
  template void attn_scores<T>(const T*, const T*, T*, const AttnShape&);                  \
  template void attn_softmax<T>(const T*, T*, const AttnShape&);                           \
  template void attn_context<T>(const T*, const T*, T*, const AttnShape&);                 \
  template void attn_context_bwd<T>(const T*, const T*, const T*, T*, T*, const AttnShape&); \
  template void attn_softmax_bwd<T>(const T*, const T*, T*, const AttnShape&);             \
  template void attn_scores_bwd<T>(const T*, const T*, const T*, T*, T*, const AttnShape&);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_ATTENTION)

}  // namespace perfsim::cpu
