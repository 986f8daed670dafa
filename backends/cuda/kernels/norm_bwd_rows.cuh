// The launch shared by the RMSNorm and LayerNorm backwards where the pipelined kernel
// (norm_bwd_pipelined.cu) does not apply (unaligned rows): the persistent register kernel when
// a row fits one block's registers, else the two-sweep kernel. The two norms differ only in
// their kernels, which a `Kernels` type names:
//   struct Kernels {
//     template <class T, int V, int N> static auto reg();  // persistent, rows in registers
//     template <class T, int V> static auto plain();       // two sweeps, one block per part
//   };
// both __global__ (x, gamma, dy, dx, partials, rows, cols, eps).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/norms.cuh"
#include "backends/cuda/kernels/row_regs.cuh"

namespace perfsim::cuda::detail {

// Calls launch(integral_constant<int, V>) with the 16-byte pack width of T, or 1.
template <class T, class F>
void dispatch_vec(bool vectorizable, F launch) {
  if (vectorizable) launch(std::integral_constant<int, vec_of<T>>{});
  else launch(std::integral_constant<int, 1>{});
}

// Launches the backward's row kernel; returns the partial-sum rows it wrote to `partials`
// (the caller sums them into the parameter gradients).
template <class Kernels, class T>
int64_t norm_bwd_rows(const T* x, const T* gamma, const T* dy, T* dx, float* partials, int64_t rows,
                      int64_t cols, float eps, cudaStream_t stream) {
  int64_t parts = norm_bwd_blocks(rows);
  const bool v = cols % vec_of<T> == 0 && aligned(16, x, gamma, dy, dx);
  dispatch_vec<T>(v, [&](auto vc) {
    constexpr int V = decltype(vc)::value;
    constexpr int N = bwd_packs<V>;
    if (const int t = reg_row_threads(cols / V, N, bwd_max_threads); t > 0) {
      // As many blocks as are resident at once (never more than the workspace holds).
      const auto kernel = Kernels::template reg<T, V, N>();
      const int64_t resident = int64_t(sm_count()) * blocks_per_sm(kernel, t);
      parts = parts < resident ? parts : resident;
      kernel<<<static_cast<unsigned>(parts), t, 0, stream>>>(x, gamma, dy, dx, partials, rows, cols, eps);
    } else {
      Kernels::template plain<T, V>()<<<static_cast<unsigned>(parts), row_threads(cols / V), 0, stream>>>(
          x, gamma, dy, dx, partials, rows, cols, eps);
    }
  });
  PERFSIM_CUDA_CHECK_LAUNCH();
  return parts;
}

}  // namespace perfsim::cuda::detail
