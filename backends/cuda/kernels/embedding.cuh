// Token embedding on the GPU, mirroring cpu::embedding/embedding_bwd
// (backends/cpu/cpu_kernels.hpp): ids [tokens] int32; table [vocab, hidden]; positions
// [max_positions, hidden] (optional); x [tokens, hidden]; token t at e.position_of(t).
// Ids are not range-checked on the device (a kernel cannot throw): the host fills them from
// backends/common/tensor_init.hpp; an out-of-range id or position produces a NaN row instead of an out-of-bounds read.
// Launchers are asynchronous on `stream` and capturable.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cuda {

template <class T> void embedding(const int32_t* ids, const T* table,
                                  const std::type_identity_t<T>* positions, T* x,
                                  const ops::EmbeddingShape& e, cudaStream_t stream);

// Floats of workspace embedding_bwd needs: none for fp32 tables (atomicAdd into the table);
// for bf16/fp16 the rows are summed in an fp32 copy of dtable (and dpositions), then
// converted (16-bit atomics would round every partial sum).
template <class T> [[nodiscard]] int64_t embedding_bwd_workspace_floats(const ops::EmbeddingShape& e,
                                                                        bool with_positions);

// Scatter-add of dx rows into dtable (and dpositions when given): overwritten, or added into
// with e.accumulate. Sums use float atomics, so their order (and the last bit) may vary
// between runs.
template <class T> void embedding_bwd(const int32_t* ids, const T* dx, T* dtable,
                                      std::type_identity_t<T>* dpositions,
                                      const ops::EmbeddingShape& e, float* workspace,
                                      cudaStream_t stream);

}  // namespace perfsim::cuda
