// Flash attention on the CPU: the forward streams K/V in tiles with an online softmax
// (running max and denominator per query row) and writes O and LSE = max + log(denominator);
// the backward recomputes score tiles from Q, K and LSE (Dao, FlashAttention-2, Alg. 1-2).
// No score matrix is ever held: the largest temporary is a tile×tile block per thread.
// Shapes as AttnShape in cpu_kernels.hpp; LSE [b, h, sq] fp32. The forward also reads K/V
// from a paged cache through its block table (paged_flash_attention), and the forward's K/V
// from an fp8 cache (each row widened with the cache's scale as its tile is loaded). With ALiBi
// every score tile, forward and backward, carries its head's linear bias (core/graph/alibi.hpp).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"
#include "core/graph/alibi.hpp"

namespace perfsim::cpu {

using detail::axpy;
using detail::dot;
using detail::thread_scratch;

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

int64_t q_offset(const AttnShape& a, int64_t b, int64_t i, int64_t h) {
  return ((b * a.seq_q + i) * a.heads + h) * a.head_dim;
}
int64_t kv_offset(const AttnShape& a, int64_t b, int64_t j, int64_t kh) {
  return ((b * a.kv_capacity + j) * a.kv_heads + kh) * a.head_dim;
}
int64_t grad_kv_offset(const AttnShape& a, int64_t b, int64_t j, int64_t kh) {
  return ((b * a.grad_capacity + j) * a.kv_heads + kh) * a.head_dim;
}
int64_t lse_offset(const AttnShape& a, int64_t b, int64_t h, int64_t i) {
  return (b * a.heads + h) * a.seq_q + i;
}

// Loads `rows` query-layout rows (stride heads·d) or kv-layout rows (stride kv_heads·d).
template <class T>
void load_tile(const T* src, int64_t stride, int64_t rows, int64_t d, float* dst) {
  detail::load_rows(src, stride, rows, d, dst);
}

// Where kv position j of sequence b sits, in kv rows (kv_heads · d elements): a contiguous
// cache [b, kv_capacity, ...] or pages through a block table (checked before the kernel runs).
struct ContiguousKv {
  int64_t capacity;
  [[nodiscard]] int64_t row(int64_t b, int64_t j) const { return b * capacity + j; }
};
struct PagedKv {
  const int32_t* table;
  PagedLayout p;
  [[nodiscard]] int64_t row(int64_t b, int64_t j) const { return p.row(table, b, j); }
};

// Loads kv positions j0 .. j0 + bc − 1 of head kh of sequence b as a [bc, d] float tile.
template <class C, class Rows>
void load_kv_tile(const C* base, const Rows& rows, const AttnShape& a, int64_t b, int64_t j0, int64_t bc,
                  int64_t kh, float* dst) {
  const int64_t d = a.head_dim;
  for (int64_t c = 0; c < bc; ++c)
    detail::load_kv_row(base + (rows.row(b, j0 + c) * a.kv_heads + kh) * d, d, a.kv.scale, dst + c * d);
}

// s[r, c] = scale · q[r]·k[c] (+ head h's ALiBi bias) for the tile, −inf where query i0+r may
// not see kv j0+c.
void score_tile(const float* qf, const float* kf, int64_t br, int64_t bc, int64_t d, float scale,
                int64_t i0, int64_t j0, int64_t h, const AttnShape& a, float* s) {
  const double slope = a.alibi_heads > 0 ? alibi_slope(h, a.alibi_heads) : 0.0;
  for (int64_t r = 0; r < br; ++r) {
    const int64_t vis = a.visible(i0 + r);
    const int64_t pos = a.seq_kv - a.seq_q + i0 + r;  // the query's position, as the mask has it
    for (int64_t c = 0; c < bc; ++c) {
      if (j0 + c >= vis) {
        s[r * bc + c] = neg_inf;
        continue;
      }
      s[r * bc + c] = dot(qf + r * d, kf + c * d, d) * scale;
      if (slope != 0) s[r * bc + c] += static_cast<float>(alibi_bias(slope, pos, j0 + c));
    }
  }
}

// The query rows before a.q_first take no part: O rows 0, LSE −inf (and dQ rows 0 in backward).
template <class T>
void clear_skipped_rows(T* rows, float* lse, const AttnShape& a) {
  for (int64_t b = 0; b < a.batch; ++b) {
    std::fill(rows + q_offset(a, b, 0, 0), rows + q_offset(a, b, a.q_first, 0), from_f32<T>(0.0f));
    if (lse != nullptr)
      for (int64_t h = 0; h < a.heads; ++h)
        std::fill(lse + lse_offset(a, b, h, 0), lse + lse_offset(a, b, h, a.q_first), neg_inf);
  }
}

template <class T, class C, class Rows>
void flash_forward(const T* q, const C* k, const C* v, const Rows& rows, T* o, float* lse, const AttnShape& a,
                   int64_t tile) {
  detail::check_kv_storage<C>(a.kv, "flash attention");
  const int64_t d = a.head_dim;
  const int64_t q_tiles = (a.seq_q - a.q_first + tile - 1) / tile;
  const float scale = a.scale();
  clear_skipped_rows(o, lse, a);
  parallel_for(a.batch * a.heads * q_tiles, 1, [&](int64_t t0, int64_t t1) {
    const auto tt = static_cast<std::size_t>(tile);
    const auto td = static_cast<std::size_t>(tile * d);
    float* qf = thread_scratch(0, td);
    float* kf = thread_scratch(1, td);
    float* vf = thread_scratch(2, td);
    float* acc = thread_scratch(3, td);
    float* s = thread_scratch(4, tt * tt);
    float* mx = thread_scratch(5, tt);
    float* den = thread_scratch(6, tt);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / (a.heads * q_tiles);
      const int64_t h = (t / q_tiles) % a.heads;
      const int64_t i0 = a.q_first + (t % q_tiles) * tile;
      const int64_t br = std::min(tile, a.seq_q - i0);
      const int64_t kh = h / a.group();
      load_tile(q + q_offset(a, b, i0, h), a.heads * d, br, d, qf);
      std::fill(acc, acc + br * d, 0.0f);
      std::fill(mx, mx + br, neg_inf);
      std::fill(den, den + br, 0.0f);
      const int64_t kv_end = a.visible(i0 + br - 1);  // the tile's last row sees the most
      for (int64_t j0 = 0; j0 < kv_end; j0 += tile) {
        const int64_t bc = std::min(tile, kv_end - j0);
        load_kv_tile(k, rows, a, b, j0, bc, kh, kf);
        load_kv_tile(v, rows, a, b, j0, bc, kh, vf);
        score_tile(qf, kf, br, bc, d, scale, i0, j0, h, a, s);
        for (int64_t r = 0; r < br; ++r) {
          float* srow = s + r * bc;
          float m_new = mx[r];
          for (int64_t c = 0; c < bc; ++c) m_new = std::max(m_new, srow[c]);
          if (m_new == neg_inf) continue;  // nothing visible yet in this row
          const float corr = std::exp(mx[r] - m_new);  // exp(−inf) = 0 on the first tile
          float* arow = acc + r * d;
          for (int64_t x = 0; x < d; ++x) arow[x] *= corr;
          float sum = 0;
          for (int64_t c = 0; c < bc; ++c) {
            if (srow[c] == neg_inf) continue;
            const float p = std::exp(srow[c] - m_new);
            sum += p;
            axpy(p, vf + c * d, arow, d);
          }
          den[r] = den[r] * corr + sum;
          mx[r] = m_new;
        }
      }
      for (int64_t r = 0; r < br; ++r) {
        const float inv = den[r] > 0 ? 1.0f / den[r] : 0.0f;
        for (int64_t x = 0; x < d; ++x) acc[r * d + x] *= inv;
        lse[lse_offset(a, b, h, i0 + r)] = den[r] > 0 ? mx[r] + std::log(den[r]) : neg_inf;
      }
      detail::store_rows(acc, br, d, o + q_offset(a, b, i0, h), a.heads * d);
    }
  });
}

}  // namespace

template <class T, class C>
void flash_attention(const T* q, const C* k, const C* v, T* o, float* lse, const AttnShape& a,
                     int64_t tile) {
  flash_forward(q, k, v, ContiguousKv{a.kv_capacity}, o, lse, a, tile);
}

int64_t paged_row(const int32_t* table, const PagedLayout& p, int64_t b, int64_t j) {
  const int32_t page = table[b * p.max_blocks + j / p.block];
  if (page < 0 || page >= p.num_blocks)
    throw std::out_of_range(fmt::format("paged KV: block table entry [{}][{}] = {} is outside the {} pages",
                                        b, j / p.block, page, p.num_blocks));
  return p.row(table, b, j);
}

template <class T, class C>
void paged_flash_attention(const T* q, const C* k_pages, const C* v_pages, const int32_t* table,
                           const PagedLayout& p, T* o, float* lse, const AttnShape& a) {
  if (p.block <= 0 || p.block * p.max_blocks < a.seq_kv)
    throw std::out_of_range(fmt::format("paged attention: {} pages of {} rows do not cover seq_kv = {}",
                                        p.max_blocks, p.block, a.seq_kv));
  // Every page the kernel will read must be in the pool.
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t j = 0; j < a.seq_kv; j += p.block) (void)paged_row(table, p, b, j);
  flash_forward(q, k_pages, v_pages, PagedKv{table, p}, o, lse, a, 64);
}

namespace {

// One thread's float tiles for the backward: the query side (Q, dO, O, LSE, D) of a query
// tile, the K/V of a kv tile, and the recomputed P and dS between them.
struct BwdTiles {
  BwdTiles(int64_t tile, int64_t d) {
    const auto tt = static_cast<std::size_t>(tile);
    const auto td = static_cast<std::size_t>(tile * d);
    qf = thread_scratch(0, td);
    dof = thread_scratch(1, td);
    of = thread_scratch(2, td);
    kf = thread_scratch(3, td);
    vf = thread_scratch(4, td);
    acc_a = thread_scratch(5, td);
    acc_b = thread_scratch(6, td);
    s = thread_scratch(7, tt * tt);
    ds = thread_scratch(8, tt * tt);
    lse_t = thread_scratch(9, tt);
    delta = thread_scratch(10, tt);
  }
  float *qf, *dof, *of, *kf, *vf;  // [tile, d]
  float *acc_a, *acc_b;            // [tile, d]: dK and dV, or dQ
  float *s, *ds;                   // [br, bc]: P and dS
  float *lse_t, *delta;            // [br]

  // Q, dO, LSE and D = rowsum(dO ⊙ O) (equal to rowsum(dP ⊙ P), the softmax-backward
  // correction) of query rows i0 .. i0 + br of head h, widened to float.
  template <class T>
  void load_query(const T* q, const T* o, const T* d_o, const float* lse, const AttnShape& a,
                  int64_t b, int64_t h, int64_t i0, int64_t br) {
    const int64_t d = a.head_dim;
    load_tile(q + q_offset(a, b, i0, h), a.heads * d, br, d, qf);
    load_tile(d_o + q_offset(a, b, i0, h), a.heads * d, br, d, dof);
    load_tile(o + q_offset(a, b, i0, h), a.heads * d, br, d, of);
    for (int64_t r = 0; r < br; ++r) {
      lse_t[r] = lse[lse_offset(a, b, h, i0 + r)];
      delta[r] = dot(dof + r * d, of + r * d, d);
    }
  }

  // K and V rows j0 .. j0 + bc of kv head kh.
  template <class T>
  void load_kv(const T* k, const T* v, const AttnShape& a, int64_t b, int64_t kh, int64_t j0,
               int64_t bc) {
    load_tile(k + kv_offset(a, b, j0, kh), a.kv_heads * a.head_dim, bc, a.head_dim, kf);
    load_tile(v + kv_offset(a, b, j0, kh), a.kv_heads * a.head_dim, bc, a.head_dim, vf);
  }

  // Recomputes P for the tile pair from the scores and LSE, then dS = P ⊙ (dO·V^T − D):
  // s holds P and ds holds dS afterwards (both [br, bc]).
  void probs_and_dscores(int64_t br, int64_t bc, int64_t i0, int64_t j0, int64_t h, const AttnShape& a) {
    const int64_t d = a.head_dim;
    score_tile(qf, kf, br, bc, d, a.scale(), i0, j0, h, a, s);
    for (int64_t r = 0; r < br; ++r)
      for (int64_t c = 0; c < bc; ++c) {
        float& p = s[r * bc + c];
        p = p == neg_inf ? 0.0f : std::exp(p - lse_t[r]);
        ds[r * bc + c] = p == 0.0f ? 0.0f : p * (dot(dof + r * d, vf + c * d, d) - delta[r]);
      }
  }
};

}  // namespace

template <class T>
void flash_attention_bwd(const T* q, const T* k, const T* v, const T* o, const T* d_o,
                         const float* lse, T* dq, T* dk, T* dv, const AttnShape& a, int64_t tile) {
  const int64_t d = a.head_dim;
  const int64_t g = a.group();
  const float scale = a.scale();
  const int64_t q_tiles = (a.seq_q - a.q_first + tile - 1) / tile;
  const int64_t kv_tiles = (a.grad_capacity + tile - 1) / tile;
  clear_skipped_rows(dq, static_cast<float*>(nullptr), a);

  // Sweep 1: each (batch, kv head, kv tile) owns its dK and dV rows, summing every query
  // tile of every head in its group. Rows seq_kv .. grad_capacity are written as zeros.
  parallel_for(a.batch * a.kv_heads * kv_tiles, 1, [&](int64_t t0, int64_t t1) {
    BwdTiles w(tile, d);
    float* dk_acc = w.acc_a;
    float* dv_acc = w.acc_b;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / (a.kv_heads * kv_tiles);
      const int64_t kh = (t / kv_tiles) % a.kv_heads;
      const int64_t j0 = (t % kv_tiles) * tile;
      const int64_t rows = std::min(tile, a.grad_capacity - j0);  // rows of dK/dV written
      const int64_t bc = std::max<int64_t>(0, std::min(tile, a.seq_kv - j0));  // valid kv rows
      std::fill(dk_acc, dk_acc + rows * d, 0.0f);
      std::fill(dv_acc, dv_acc + rows * d, 0.0f);
      if (bc > 0) {
        w.load_kv(k, v, a, b, kh, j0, bc);
        for (int64_t h = kh * g; h < (kh + 1) * g; ++h)
          for (int64_t i0 = a.q_first; i0 < a.seq_q; i0 += tile) {
            const int64_t br = std::min(tile, a.seq_q - i0);
            if (a.visible(i0 + br - 1) <= j0) continue;  // the whole tile is masked
            w.load_query(q, o, d_o, lse, a, b, h, i0, br);
            w.probs_and_dscores(br, bc, i0, j0, h, a);
            for (int64_t r = 0; r < br; ++r)
              for (int64_t c = 0; c < bc; ++c) {
                const float p = w.s[r * bc + c];
                if (p == 0.0f) continue;
                axpy(p, w.dof + r * d, dv_acc + c * d, d);                     // dV += P^T·dO
                axpy(w.ds[r * bc + c] * scale, w.qf + r * d, dk_acc + c * d, d);  // dK += dS^T·Q
              }
          }
      }
      detail::store_rows(dk_acc, rows, d, dk + grad_kv_offset(a, b, j0, kh), a.kv_heads * d);
      detail::store_rows(dv_acc, rows, d, dv + grad_kv_offset(a, b, j0, kh), a.kv_heads * d);
    }
  });

  // Sweep 2: each (batch, head, query tile) owns its dQ rows.
  parallel_for(a.batch * a.heads * q_tiles, 1, [&](int64_t t0, int64_t t1) {
    BwdTiles w(tile, d);
    float* dq_acc = w.acc_a;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / (a.heads * q_tiles);
      const int64_t h = (t / q_tiles) % a.heads;
      const int64_t i0 = a.q_first + (t % q_tiles) * tile;
      const int64_t br = std::min(tile, a.seq_q - i0);
      w.load_query(q, o, d_o, lse, a, b, h, i0, br);
      std::fill(dq_acc, dq_acc + br * d, 0.0f);
      const int64_t kv_end = a.visible(i0 + br - 1);
      for (int64_t j0 = 0; j0 < kv_end; j0 += tile) {
        const int64_t bc = std::min(tile, kv_end - j0);
        w.load_kv(k, v, a, b, h / g, j0, bc);
        w.probs_and_dscores(br, bc, i0, j0, h, a);
        for (int64_t r = 0; r < br; ++r)
          for (int64_t c = 0; c < bc; ++c) {
            const float ds = w.ds[r * bc + c];
            if (ds != 0.0f) axpy(ds * scale, w.kf + c * d, dq_acc + r * d, d);  // dQ += dS·K
          }
      }
      detail::store_rows(dq_acc, br, d, dq + q_offset(a, b, i0, h), a.heads * d);
    }
  });
}

#define PERFSIM_INSTANTIATE_FLASH_KV(T, C)                                                       \
  template void flash_attention<T, C>(const T*, const C*, const C*, T*, float*, const AttnShape&, int64_t); \
  template void paged_flash_attention<T, C>(const T*, const C*, const C*, const int32_t*, const PagedLayout&, \
                                            T*, float*, const AttnShape&);
PERFSIM_CPU_INSTANTIATE_KV(PERFSIM_INSTANTIATE_FLASH_KV)

#define PERFSIM_INSTANTIATE_FLASH(T)                                                    \
  template void flash_attention_bwd<T>(const T*, const T*, const T*, const T*, const T*, \
                                       const float*, T*, T*, T*, const AttnShape&, int64_t);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_FLASH)

}  // namespace perfsim::cpu
