// The CUDA backend's kernels by op kind (ops::KernelTable), for the ops whose float operands
// share one storage T (__nv_bfloat16, __half, float): each entry names its operands through a
// view of backends/ops/op_io.hpp, derives its shapes (backends/ops/op_shapes.hpp) and calls the
// launcher of backends/cuda/kernels/. OpExecutor::run_generic (cuda_op_kernels.cpp) stages the
// operands and looks the kernel up; GEMMs, AdamW and copies are OpExecutor's own
// (cuda_op_exec.cpp).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <span>

#include "backends/cuda/cuda_blas.hpp"
#include "backends/ops/kernel_table.hpp"
#include "backends/ops/operands.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::cuda {

template <class T>
struct CudaCall {
  const Op& op;
  const Graph& g;
  std::span<void* const> in, out;                   // staged in T (fixed int32/fp32 ones as they are)
  const std::function<void*(std::size_t)>& scratch;  // the op's planned workspace (core/cost/workspace.cpp)
  const BlasHandle* blas;                            // materialized attention's products (may be null)
  cudaStream_t stream;
  int rank = 0;  // the executing global rank: a context-parallel op's rows follow from it
  template <class V> [[nodiscard]] V view() const { return ops::view<V>(op, in, out); }
};
template <class T> using CudaKernel = void (*)(const CudaCall<T>&);

template <class T> [[nodiscard]] const ops::KernelTable<CudaKernel<T>>& typed_kernels();

}  // namespace perfsim::cuda
