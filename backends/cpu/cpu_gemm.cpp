// GEMM: C[batch][m,n] (+)= op(A)[m,k]·op(B)[k,n] on OpenBLAS sgemm (backends/cpu/blas). fp32 and tf32 operands
// go to sgemm directly; bf16/fp16 operands are widened to fp32 one block at a time into a
// bounded workspace (counted by the caller as transient memory) and C blocks narrowed back.
// A few rows against a 16-bit B (decode) take a streaming path that reads B only once.
#include <cblas.h>  // blasint

#include <fmt/format.h>

#include <limits>
#include <stdexcept>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"

namespace perfsim::cpu {

namespace {

// Block sizes for the converted path: a 256x512 A block, 512x512 B block and 256x512 C block
// (2 MiB of fp32) keep sgemm efficient while the workspace stays small.
constexpr int64_t block_m = 256, block_n = 512, block_k = 512;

// Rows of a block converted per parallel chunk: enough elements to outweigh the hand-off.
constexpr int64_t convert_grain_elems = 1 << 15;

// dst[r, c] (rows x cols, row-major fp32) = logical[r0 + r, c0 + c] of a matrix stored with
// leading dimension ld, transposed when `transposed` (stored [cols_total, rows_total]).
template <class S>
void gather_block(const S* src, int64_t ld, bool transposed, int64_t r0, int64_t c0,
                  int64_t rows, int64_t cols, float* dst) {
  const int64_t grain = std::max<int64_t>(1, convert_grain_elems / std::max<int64_t>(cols, 1));
  parallel_for(rows, grain, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      float* out = dst + r * cols;
      if (transposed) {
        for (int64_t c = 0; c < cols; ++c) out[c] = to_f32(src[(c0 + c) * ld + r0 + r]);
      } else {
        const S* in = src + (r0 + r) * ld + c0;
        for (int64_t c = 0; c < cols; ++c) out[c] = to_f32(in[c]);
      }
    }
  });
}

// logical[r0 + r, c0 + c] of a row-major matrix with leading dimension ld = src[r, c].
template <class S>
void scatter_block(const float* src, int64_t rows, int64_t cols, S* dst, int64_t ld, int64_t r0,
                   int64_t c0) {
  const int64_t grain = std::max<int64_t>(1, convert_grain_elems / std::max<int64_t>(cols, 1));
  parallel_for(rows, grain, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      S* out = dst + (r0 + r) * ld + c0;
      for (int64_t c = 0; c < cols; ++c) out[c] = from_f32<S>(src[r * cols + c]);
    }
  });
}

void gather_any(const void* src, Storage t, int64_t ld, bool transposed, int64_t r0, int64_t c0,
                int64_t rows, int64_t cols, float* dst) {
  switch (t) {
    case Storage::f32: gather_block(static_cast<const float*>(src), ld, transposed, r0, c0, rows, cols, dst); return;
    case Storage::bf16: gather_block(static_cast<const bf16*>(src), ld, transposed, r0, c0, rows, cols, dst); return;
    case Storage::f16: gather_block(static_cast<const half*>(src), ld, transposed, r0, c0, rows, cols, dst); return;
    default: throw std::logic_error("gemm: operand is not a float storage");
  }
}

void scatter_any(const float* src, int64_t rows, int64_t cols, void* dst, Storage t, int64_t ld,
                 int64_t r0, int64_t c0) {
  switch (t) {
    case Storage::f32: scatter_block(src, rows, cols, static_cast<float*>(dst), ld, r0, c0); return;
    case Storage::bf16: scatter_block(src, rows, cols, static_cast<bf16*>(dst), ld, r0, c0); return;
    case Storage::f16: scatter_block(src, rows, cols, static_cast<half*>(dst), ld, r0, c0); return;
    default: throw std::logic_error("gemm: result is not a float storage");
  }
}

void check_blas_range(const GemmShape& s) {
  constexpr int64_t limit = std::numeric_limits<blasint>::max();
  if (s.m > limit || s.n > limit || s.k > limit)
    throw std::invalid_argument(fmt::format("gemm {}x{}x{} exceeds the BLAS index range", s.m, s.n, s.k));
}

// One batch entry, fp32 everywhere: a single sgemm.
void gemm_f32(const float* a, const float* b, float* c, const GemmShape& s) {
  const int64_t lda = s.trans_a ? s.m : s.k;
  const int64_t ldb = s.trans_b ? s.k : s.n;
  blas::sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a, lda, b, ldb, s.accumulate ? 1.0f : 0.0f, c, s.n);
}

// Rows r0 .. r0 + rows, columns c0 .. c0 + cols of op(X) as sgemm reads them: X itself when
// stored fp32, else the block widened into `scratch` (row-major, untransposed).
struct Panel {
  const float* data;
  int64_t ld;
  bool trans;
};
Panel panel(const void* x, Storage t, int64_t ld, bool trans, int64_t r0, int64_t c0,
            int64_t rows, int64_t cols, float* scratch) {
  if (t == Storage::f32)
    return {static_cast<const float*>(x) + (trans ? c0 * ld + r0 : r0 * ld + c0), ld, trans};
  gather_any(x, t, ld, trans, r0, c0, rows, cols, scratch);
  return {scratch, cols, false};
}

// One batch entry with at least one 16-bit operand: blocks of op(A), op(B) and C are
// converted to fp32 (fp32 operands are used in place) and multiplied with sgemm.
void gemm_blocked(const void* a, Storage ta, const void* b, Storage tb, void* c, Storage tc,
                  const GemmShape& s, float* ws) {
  const int64_t lda = s.trans_a ? s.m : s.k;
  const int64_t ldb = s.trans_b ? s.k : s.n;
  float* wa = ws;
  float* wb = wa + std::min(s.m, block_m) * std::min(s.k, block_k);
  float* wc = wb + std::min(s.k, block_k) * std::min(s.n, block_n);
  for (int64_t i0 = 0; i0 < s.m; i0 += block_m) {
    const int64_t mb = std::min(block_m, s.m - i0);
    for (int64_t j0 = 0; j0 < s.n; j0 += block_n) {
      const int64_t nb = std::min(block_n, s.n - j0);
      float* cp;
      int64_t ldc;
      float beta = s.accumulate ? 1.0f : 0.0f;
      if (tc == Storage::f32) {
        cp = static_cast<float*>(c) + i0 * s.n + j0;
        ldc = s.n;
      } else {
        cp = wc;
        ldc = nb;
        if (s.accumulate) gather_any(c, tc, s.n, false, i0, j0, mb, nb, wc);
      }
      for (int64_t k0 = 0; k0 < s.k; k0 += block_k) {
        const int64_t kb = std::min(block_k, s.k - k0);
        const Panel ap = panel(a, ta, lda, s.trans_a, i0, k0, mb, kb, wa);
        const Panel bp = panel(b, tb, ldb, s.trans_b, k0, j0, kb, nb, wb);
        blas::sgemm(ap.trans, bp.trans, mb, nb, kb, 1.0f, ap.data, ap.ld, bp.data, bp.ld, beta, cp, ldc);
        beta = 1.0f;
      }
      if (tc != Storage::f32) {
        if (s.k == 0 && !s.accumulate) std::fill(wc, wc + mb * nb, 0.0f);
        scatter_any(wc, mb, nb, c, tc, s.n, i0, j0);
      }
    }
  }
}

// Decode-shaped products (a few rows of A against a large 16-bit B) stream B once,
// widening in registers: converting B to fp32 first would move 5x the bytes (read 2, write
// 4, read 4 again) for work that is bound by reading B.
constexpr int64_t small_m = 8;
constexpr int64_t column_block = 256;

bool use_small_m(const GemmShape& s, Storage tb) { return s.m <= small_m && tb != Storage::f32; }

template <class S>
void small_m_typed(const float* af, const S* b, void* c, Storage tc, const GemmShape& s) {
  const int64_t m = s.m, n = s.n, k = s.k;
  if (s.trans_b) {
    // B stored [n, k]: C[i, j] = A[i, :] · B[j, :], one row of B per output column.
    parallel_for(n, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(k, 1)), [&](int64_t j0, int64_t j1) {
      float* bf = detail::thread_scratch(0, static_cast<std::size_t>(k));
      float out[small_m * column_block];
      float prev[column_block];
      for (int64_t jb = j0; jb < j1; jb += column_block) {
        const int64_t nb = std::min(column_block, j1 - jb);
        for (int64_t j = 0; j < nb; ++j) {
          const float* row = detail::as_float(b + (jb + j) * k, k, bf);
          for (int64_t i = 0; i < m; ++i) out[i * nb + j] = detail::dot(af + i * k, row, k);
        }
        for (int64_t i = 0; i < m; ++i) {
          if (s.accumulate) {
            gather_any(c, tc, n, false, i, jb, 1, nb, prev);
            for (int64_t j = 0; j < nb; ++j) out[i * nb + j] += prev[j];
          }
          scatter_any(out + i * nb, 1, nb, c, tc, n, i, jb);
        }
      }
    });
    return;
  }
  // B stored [k, n]: each task owns a block of columns and sweeps B's rows once. Blocks are
  // as wide as the accumulators allow (64 KiB of fp32), so each row is read in long runs
  // rather than short strided pieces that defeat the prefetcher.
  const int64_t per_thread = (n + thread_count() - 1) / thread_count();
  const int64_t width = std::clamp<int64_t>((per_thread + 63) / 64 * 64, column_block,
                                            std::max<int64_t>(column_block, 16384 / m));
  const int64_t blocks = (n + width - 1) / width;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    float* acc = detail::thread_scratch(0, static_cast<std::size_t>(m * width));
    float* bf = detail::thread_scratch(1, static_cast<std::size_t>(width));
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t j0 = blk * width, nb = std::min(width, n - j0);
      if (s.accumulate) gather_any(c, tc, n, false, 0, j0, m, nb, acc);
      else std::fill(acc, acc + m * nb, 0.0f);
      int64_t kk = 0;
      // Four rows of B per sweep over the accumulators: a quarter of the accumulator traffic.
      for (; kk + 4 <= k; kk += 4) {
        const S* r0 = b + kk * n + j0;
        const S* r1 = r0 + n;
        const S* r2 = r1 + n;
        const S* r3 = r2 + n;
        for (int64_t i = 0; i < m; ++i) {
          const float* ai = af + i * k + kk;
          const float a0 = ai[0], a1 = ai[1], a2 = ai[2], a3 = ai[3];
          float* out = acc + i * nb;
          for (int64_t j = 0; j < nb; ++j)
            out[j] += (a0 * to_f32(r0[j]) + a1 * to_f32(r1[j])) + (a2 * to_f32(r2[j]) + a3 * to_f32(r3[j]));
        }
      }
      for (; kk < k; ++kk) {
        const float* row = detail::as_float(b + kk * n + j0, nb, bf);
        for (int64_t i = 0; i < m; ++i) detail::axpy(af[i * k + kk], row, acc + i * nb, nb);
      }
      scatter_any(acc, m, nb, c, tc, n, 0, j0);
    }
  });
}

// One batch entry on the small-m path; A is widened into the workspace first (m·k floats).
void gemm_small_m(const void* a, Storage ta, const void* b, Storage tb, void* c, Storage tc,
                  const GemmShape& s, float* ws) {
  gather_any(a, ta, s.trans_a ? s.m : s.k, s.trans_a, 0, 0, s.m, s.k, ws);
  if (tb == Storage::bf16) small_m_typed(ws, static_cast<const bf16*>(b), c, tc, s);
  else small_m_typed(ws, static_cast<const half*>(b), c, tc, s);
}

const void* offset(const void* p, Storage t, int64_t elems) {
  return static_cast<const char*>(p) + elems * bytes_of(t);
}
void* offset(void* p, Storage t, int64_t elems) {
  return static_cast<char*>(p) + elems * bytes_of(t);
}

}  // namespace

int64_t gemm_workspace_floats(const GemmShape& s, Storage a, Storage b, Storage c) {
  if (a == Storage::f32 && b == Storage::f32 && c == Storage::f32) return 0;
  if (use_small_m(s, b)) return s.m * s.k;
  return std::min(s.m, block_m) * std::min(s.k, block_k) +
         std::min(s.k, block_k) * std::min(s.n, block_n) +
         std::min(s.m, block_m) * std::min(s.n, block_n);
}

void gemm(const void* a, Storage ta, const void* b, Storage tb, void* c, Storage tc,
          const GemmShape& s, float* workspace) {
  check_blas_range(s);
  const bool all_f32 = ta == Storage::f32 && tb == Storage::f32 && tc == Storage::f32;
  const int64_t stride_a = s.broadcast_a ? 0 : s.m * s.k;
  const int64_t stride_b = s.broadcast_b ? 0 : s.k * s.n;
  const int64_t stride_c = s.m * s.n;
  for (int64_t bi = 0; bi < s.batch; ++bi) {
    const void* ab = offset(a, ta, bi * stride_a);
    const void* bb = offset(b, tb, bi * stride_b);
    void* cb = offset(c, tc, bi * stride_c);
    if (all_f32)
      gemm_f32(static_cast<const float*>(ab), static_cast<const float*>(bb), static_cast<float*>(cb), s);
    else if (use_small_m(s, tb))
      gemm_small_m(ab, ta, bb, tb, cb, tc, s, workspace);
    else
      gemm_blocked(ab, ta, bb, tb, cb, tc, s, workspace);
  }
}

}  // namespace perfsim::cpu
