// sgemm on the backend's pool with OpenBLAS single-threaded (see blas.hpp).
#include "backends/cpu/blas.hpp"

#include <cblas.h>

#include <algorithm>
#include <mutex>

#include "backends/common/parallel.hpp"

namespace perfsim::cpu::blas {

namespace {

// Products below this many multiply-adds run inline: splitting them costs more than it saves.
constexpr int64_t min_shared_macs = int64_t{1} << 20;
// Panels are whole multiples of this many columns (rows), so each keeps OpenBLAS's full
// register blocks.
constexpr int64_t panel_align = 64;

void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

blasint bl(int64_t v) { return static_cast<blasint>(v); }

void call(bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, bl(rows), bl(cols),
              bl(inner), alpha, a, bl(lda), b, bl(ldb), beta, c, bl(ldc));
}

}  // namespace

void sgemm(bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  single_threaded_blas();
  const int threads = host::thread_count();
  if (threads == 1 || rows * cols * inner < min_shared_macs || std::max(rows, cols) < 2 * panel_align) {
    call(ta, tb, rows, cols, inner, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Split the longer side of C into aligned panels, a few per thread.
  const bool by_cols = cols >= rows;
  const int64_t extent = by_cols ? cols : rows;
  const int64_t per = (extent + threads - 1) / threads;
  const int64_t panel = std::max(panel_align, (per + panel_align - 1) / panel_align * panel_align);
  const int64_t panels = (extent + panel - 1) / panel;
  host::parallel_for(panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t start = p * panel, len = std::min(panel, extent - start);
      if (by_cols) {
        // Columns start..start+len of op(B) and C.
        const float* bp = tb ? b + start * ldb : b + start;
        call(ta, tb, rows, len, inner, alpha, a, lda, bp, ldb, beta, c + start, ldc);
      } else {
        // Rows start..start+len of op(A) and C.
        const float* ap = ta ? a + start : a + start * lda;
        call(ta, tb, len, cols, inner, alpha, ap, lda, b, ldb, beta, c + start * ldc, ldc);
      }
    }
  });
}

}  // namespace perfsim::cpu::blas
