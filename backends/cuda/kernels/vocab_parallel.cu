// Vocabulary-parallel embedding, its backward and the cross-entropy's three row passes (see
// vocab_parallel.cuh). Small next to the GEMMs around them, so the kernels stay scalar and
// simple: one thread per element for the embedding, one block per row for the loss.
#include <limits>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/vocab_parallel.cuh"

namespace perfsim::cuda {

namespace {

constexpr int k_threads = 256;

template <class T>
__global__ void vocab_embedding_kernel(const int32_t* __restrict__ ids, const T* __restrict__ table,
                                       const T* __restrict__ positions, T* __restrict__ x, ops::EmbeddingShape e,
                                       int64_t offset) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < e.tokens * e.hidden;
       w += stride) {
    const int64_t t = w / e.hidden, c = w % e.hidden;
    const int64_t local = static_cast<int64_t>(ids[t]) - offset;
    // A token of another rank's rows gives a zero row here (the all-reduce brings its values).
    float v = local >= 0 && local < e.vocab ? detail::to_f32(table[local * e.hidden + c]) : 0.0f;
    if (positions != nullptr) {
      const int64_t p = e.position_of(t);
      // As embedding.cu: a position past the table is a NaN, not an out-of-bounds read.
      v += p < e.max_positions ? detail::to_f32(positions[p * e.hidden + c])
                               : std::numeric_limits<float>::quiet_NaN();
    }
    x[w] = detail::from_f32<T>(v);
  }
}

// acc: [vocab, hidden] fp32 (the fp32 table, or the workspace of a 16-bit one); accp likewise
// for the positions (null without them).
template <class T>
__global__ void vocab_scatter_add_kernel(const int32_t* __restrict__ ids, const T* __restrict__ dx, float* acc,
                                         float* accp, ops::EmbeddingShape e, int64_t offset) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < e.tokens * e.hidden;
       w += stride) {
    const int64_t t = w / e.hidden, c = w % e.hidden;
    const float g = detail::to_f32(dx[w]);
    const int64_t local = static_cast<int64_t>(ids[t]) - offset;
    if (local >= 0 && local < e.vocab) atomicAdd(acc + local * e.hidden + c, g);
    // Every token's, on every rank: unlike embedding.cu, a token outside the rows still counts.
    const int64_t p = e.position_of(t);
    if (accp != nullptr && p < e.max_positions) atomicAdd(accp + p * e.hidden + c, g);
  }
}

// out[i] = (accumulate ? out[i] : 0) + ws[i], rounded to T once.
template <class T>
__global__ void vocab_finish_kernel(const float* __restrict__ ws, T* __restrict__ out, int64_t n, bool accumulate) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = detail::from_f32<T>((accumulate ? detail::to_f32(out[i]) : 0.0f) + ws[i]);
}

// One block per row of logits [rows, cols].
template <class T>
__global__ void vocab_row_max_kernel(const T* __restrict__ logits, float* __restrict__ row_max, int64_t cols) {
  const T* x = logits + static_cast<int64_t>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, detail::to_f32(x[c]));
  m = detail::block_max(m);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

template <class T>
__global__ void vocab_row_sum_exp_kernel(const T* __restrict__ logits, const float* __restrict__ row_max,
                                         float* __restrict__ row_sum, int64_t cols) {
  const T* x = logits + static_cast<int64_t>(blockIdx.x) * cols;
  const float m = row_max[blockIdx.x];
  float s[1] = {0.0f};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s[0] += expf(detail::to_f32(x[c]) - m);
  detail::block_sum(s);
  if (threadIdx.x == 0) row_sum[blockIdx.x] = s[0];
}

template <class T>
__global__ void vocab_loss_kernel(const T* __restrict__ logits, const int32_t* __restrict__ targets,
                                  const float* __restrict__ row_max, const float* __restrict__ row_sum,
                                  float* __restrict__ loss, T* __restrict__ dlogits, int64_t cols, int64_t offset,
                                  int parts, float inv_rows) {
  const int64_t r = blockIdx.x;
  const T* x = logits + r * cols;
  const float lse = row_max[r] + logf(row_sum[r]);
  const int64_t target = static_cast<int64_t>(targets[r]) - offset;  // in this rank's columns
  const bool mine = target >= 0 && target < cols;
  if (threadIdx.x == 0)
    loss[r] = lse / static_cast<float>(parts) - (mine ? detail::to_f32(x[target]) : 0.0f);
  if (dlogits == nullptr) return;
  T* d = dlogits + r * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    d[c] = detail::from_f32<T>((expf(detail::to_f32(x[c]) - lse) - (mine && c == target ? 1.0f : 0.0f)) * inv_rows);
}

}  // namespace

template <class T>
void vocab_embedding(const int32_t* ids, const T* table, const std::type_identity_t<T>* positions, T* x,
                     const ops::EmbeddingShape& e, int64_t offset, cudaStream_t stream) {
  if (e.tokens <= 0 || e.hidden <= 0) return;
  ops::EmbeddingShape s = e;
  if (s.seq <= 0) s.seq = 1;
  vocab_embedding_kernel<T><<<detail::grid_for(e.tokens * e.hidden, k_threads), k_threads, 0, stream>>>(
      ids, table, positions, x, s, offset);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void vocab_embedding_bwd(const int32_t* ids, const T* dx, T* dtable, std::type_identity_t<T>* dpositions,
                         const ops::EmbeddingShape& e, int64_t offset, float* workspace, cudaStream_t stream) {
  ops::EmbeddingShape s = e;
  if (s.seq <= 0) s.seq = 1;
  const int64_t table_n = e.vocab * e.hidden, pos_n = e.max_positions * e.hidden;
  float* acc = nullptr;
  float* accp = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    // fp32: the atomics go straight into the gradients, zeroed first unless accumulating.
    acc = dtable;
    accp = dpositions;
    if (!e.accumulate) {
      PERFSIM_CUDA_CHECK(cudaMemsetAsync(dtable, 0, static_cast<size_t>(table_n) * sizeof(float), stream));
      if (dpositions != nullptr)
        PERFSIM_CUDA_CHECK(cudaMemsetAsync(dpositions, 0, static_cast<size_t>(pos_n) * sizeof(float), stream));
    }
  } else {
    // 16-bit: summed in the fp32 workspace [table_n (+ pos_n)], then rounded once into the gradients.
    acc = workspace;
    accp = dpositions != nullptr ? workspace + table_n : nullptr;
    const int64_t ws_n = table_n + (dpositions != nullptr ? pos_n : 0);
    PERFSIM_CUDA_CHECK(cudaMemsetAsync(workspace, 0, static_cast<size_t>(ws_n) * sizeof(float), stream));
  }
  if (e.tokens > 0 && e.hidden > 0) {
    vocab_scatter_add_kernel<T><<<detail::grid_for(e.tokens * e.hidden, k_threads), k_threads, 0, stream>>>(
        ids, dx, acc, accp, s, offset);
    PERFSIM_CUDA_CHECK_LAUNCH();
  }
  if constexpr (!std::is_same_v<T, float>) {
    vocab_finish_kernel<T><<<detail::grid_for(table_n, k_threads), k_threads, 0, stream>>>(acc, dtable, table_n,
                                                                                           e.accumulate);
    PERFSIM_CUDA_CHECK_LAUNCH();
    if (dpositions != nullptr) {
      vocab_finish_kernel<T><<<detail::grid_for(pos_n, k_threads), k_threads, 0, stream>>>(accp, dpositions, pos_n,
                                                                                           e.accumulate);
      PERFSIM_CUDA_CHECK_LAUNCH();
    }
  }
}

template <class T>
void vocab_row_max(const T* logits, float* row_max, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  vocab_row_max_kernel<T><<<static_cast<unsigned>(rows), detail::row_threads(cols), 0, stream>>>(logits, row_max,
                                                                                                cols);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void vocab_row_sum_exp(const T* logits, const float* row_max, float* row_sum, int64_t rows, int64_t cols,
                       cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  vocab_row_sum_exp_kernel<T><<<static_cast<unsigned>(rows), detail::row_threads(cols), 0, stream>>>(
      logits, row_max, row_sum, cols);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void vocab_cross_entropy_loss(const T* logits, const int32_t* targets, const float* row_max, const float* row_sum,
                              float* loss, std::type_identity_t<T>* dlogits, int64_t rows, int64_t cols,
                              int64_t offset, int parts, float inv_rows, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  vocab_loss_kernel<T><<<static_cast<unsigned>(rows), detail::row_threads(cols), 0, stream>>>(
      logits, targets, row_max, row_sum, loss, dlogits, cols, offset, parts, inv_rows);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

#define PERFSIM_CUDA_INSTANTIATE_VOCAB_PARALLEL(T)                                                                \
  template void vocab_embedding<T>(const int32_t*, const T*, const T*, T*, const ops::EmbeddingShape&, int64_t,   \
                                   cudaStream_t);                                                                 \
  template void vocab_embedding_bwd<T>(const int32_t*, const T*, T*, T*, const ops::EmbeddingShape&, int64_t,     \
                                       float*, cudaStream_t);                                                     \
  template void vocab_row_max<T>(const T*, float*, int64_t, int64_t, cudaStream_t);                               \
  template void vocab_row_sum_exp<T>(const T*, const float*, float*, int64_t, int64_t, cudaStream_t);             \
  template void vocab_cross_entropy_loss<T>(const T*, const int32_t*, const float*, const float*, float*, T*,     \
                                            int64_t, int64_t, int64_t, int, float, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_VOCAB_PARALLEL(float)
PERFSIM_CUDA_INSTANTIATE_VOCAB_PARALLEL(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_VOCAB_PARALLEL(__half)

}  // namespace perfsim::cuda
