// Embedding gather (x[t] = table[ids[t]] (+ positions[pos(t)])) and its scatter-add backward.
// Forward: one thread per 16-byte chunk of an output row. Backward: dtable zeroed (unless
// accumulating), then one thread per element adds dx into the row with a float atomic; for
// 16-bit tables the atomics go to an fp32 workspace that a last kernel converts (and adds to
// the old table values when accumulating). Shapes in embedding.cuh.
#include <limits>
#include <type_traits>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/embedding.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"

namespace perfsim::cuda {

namespace {

template <class T, int V>
__global__ void embedding_kernel(const int32_t* __restrict__ ids, const T* __restrict__ table,
                                 const T* __restrict__ positions, T* __restrict__ x,
                                 ops::EmbeddingShape e) {
  const int64_t per_row = e.hidden / V;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       w < e.tokens * per_row; w += stride) {
    const int64_t t = w / per_row, c = (w % per_row) * V;
    const int64_t id = ids[t];
    const int64_t pos = e.position_of(t);
    float out[V];
    if (id < 0 || id >= e.vocab || (positions != nullptr && pos >= e.max_positions)) {
#pragma unroll
      for (int i = 0; i < V; ++i) out[i] = std::numeric_limits<float>::quiet_NaN();
    } else {
      detail::load_f32<T, V>(table + id * e.hidden + c, out);
      if (positions != nullptr) {
        float p[V];
        detail::load_f32<T, V>(positions + pos * e.hidden + c, p);
#pragma unroll
        for (int i = 0; i < V; ++i) out[i] += p[i];
      }
    }
    detail::store_f32<T, V>(x + t * e.hidden + c, out);
  }
}

// acc [vocab, hidden] (fp32 table or fp32 workspace); accp likewise for positions.
__global__ void scatter_add_kernel(const int32_t* __restrict__ ids, const void* __restrict__ dx,
                                   int dx_kind, float* acc, float* accp, ops::EmbeddingShape e) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       w < e.tokens * e.hidden; w += stride) {
    const int64_t t = w / e.hidden, c = w % e.hidden;
    const int64_t id = ids[t];
    if (id < 0 || id >= e.vocab) continue;
    float g;
    if (dx_kind == 0) g = static_cast<const float*>(dx)[w];
    else if (dx_kind == 1) g = detail::to_f32(static_cast<const __nv_bfloat16*>(dx)[w]);
    else g = detail::to_f32(static_cast<const __half*>(dx)[w]);
    atomicAdd(acc + id * e.hidden + c, g);
    const int64_t pos = e.position_of(t);
    if (accp != nullptr && pos < e.max_positions) atomicAdd(accp + pos * e.hidden + c, g);
  }
}

// out[i] = (accumulate ? out[i] : 0) + ws[i], rounded to T once.
template <class T>
__global__ void finish_kernel(const float* __restrict__ ws, T* __restrict__ out, int64_t n,
                              bool accumulate) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = detail::from_f32<T>((accumulate ? detail::to_f32(out[i]) : 0.0f) + ws[i]);
}

template <class T> constexpr int kind_of() {
  return std::is_same_v<T, float> ? 0 : (std::is_same_v<T, __nv_bfloat16> ? 1 : 2);
}

}  // namespace

template <class T>
void embedding(const int32_t* ids, const T* table, const std::type_identity_t<T>* positions, T* x,
               const ops::EmbeddingShape& e, cudaStream_t stream) {
  if (e.tokens <= 0 || e.hidden <= 0) return;
  ops::EmbeddingShape s = e;
  if (s.seq <= 0) s.seq = 1;
  constexpr int threads = 256;
  constexpr int vec = detail::vec_of<T>;
  if (e.hidden % vec == 0 && detail::aligned(16, table, positions, x))
    embedding_kernel<T, vec><<<detail::grid_for(e.tokens * e.hidden / vec, threads), threads, 0,
                               stream>>>(ids, table, positions, x, s);
  else
    embedding_kernel<T, 1><<<detail::grid_for(e.tokens * e.hidden, threads), threads, 0, stream>>>(
        ids, table, positions, x, s);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
int64_t embedding_bwd_workspace_floats(const ops::EmbeddingShape& e, bool with_positions) {
  if constexpr (std::is_same_v<T, float>) return 0;
  return e.vocab * e.hidden + (with_positions ? e.max_positions * e.hidden : 0);
}

template <class T>
void embedding_bwd(const int32_t* ids, const T* dx, T* dtable, std::type_identity_t<T>* dpositions,
                   const ops::EmbeddingShape& e, float* workspace, cudaStream_t stream) {
  ops::EmbeddingShape s = e;
  if (s.seq <= 0) s.seq = 1;
  const int64_t table_n = e.vocab * e.hidden, pos_n = e.max_positions * e.hidden;
  constexpr int threads = 256;
  float* acc = nullptr;
  float* accp = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    acc = dtable;
    accp = dpositions;
    if (!e.accumulate) {
      PERFSIM_CUDA_CHECK(cudaMemsetAsync(dtable, 0, static_cast<size_t>(table_n) * sizeof(float), stream));
      if (dpositions != nullptr)
        PERFSIM_CUDA_CHECK(cudaMemsetAsync(dpositions, 0, static_cast<size_t>(pos_n) * sizeof(float), stream));
    }
  } else {
    acc = workspace;
    accp = dpositions != nullptr ? workspace + table_n : nullptr;
    const int64_t ws_n = table_n + (dpositions != nullptr ? pos_n : 0);
    PERFSIM_CUDA_CHECK(cudaMemsetAsync(workspace, 0, static_cast<size_t>(ws_n) * sizeof(float), stream));
  }
  if (e.tokens > 0 && e.hidden > 0) {
    scatter_add_kernel<<<detail::grid_for(e.tokens * e.hidden, threads), threads, 0, stream>>>(
        ids, dx, kind_of<T>(), acc, accp, s);
    PERFSIM_CUDA_CHECK_LAUNCH();
  }
  if constexpr (!std::is_same_v<T, float>) {
    finish_kernel<T><<<detail::grid_for(table_n, threads), threads, 0, stream>>>(acc, dtable, table_n,
                                                                                 e.accumulate);
    PERFSIM_CUDA_CHECK_LAUNCH();
    if (dpositions != nullptr) {
      finish_kernel<T><<<detail::grid_for(pos_n, threads), threads, 0, stream>>>(accp, dpositions,
                                                                                 pos_n, e.accumulate);
      PERFSIM_CUDA_CHECK_LAUNCH();
    }
  }
}

#define PERFSIM_CUDA_INSTANTIATE_EMBEDDING(T)                                                  \
  template void embedding<T>(const int32_t*, const T*, const T*, T*, const ops::EmbeddingShape&, \
                             cudaStream_t);                                                    \
  template int64_t embedding_bwd_workspace_floats<T>(const ops::EmbeddingShape&, bool);        \
  template void embedding_bwd<T>(const int32_t*, const T*, T*, T*, const ops::EmbeddingShape&, \
                                 float*, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_EMBEDDING(float)
PERFSIM_CUDA_INSTANTIATE_EMBEDDING(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_EMBEDDING(__half)

}  // namespace perfsim::cuda
