// KV-cache append and last-token slice as strided device-to-device copies, the paged append
// as a kernel (its rows scatter through a block table), the varlen append and gather as
// kernels of one block per row (rows scatter to slots / gather from indices on the device),
// and dtype conversion as a grid-stride kernel. An fp8 cache's three appends are one
// quantizing kernel (a block per new row) with the appends' row placements. Shapes in
// memory_ops.cuh.
#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/memory_ops.cuh"

namespace perfsim::cuda {

namespace {

template <class S, class D>
__global__ void convert_kernel(const S* __restrict__ x, D* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = detail::from_f32<D>(detail::to_f32(x[i]));
}

template <class S>
void convert_from(const S* x, void* y, host::Storage y_type, int64_t n, cudaStream_t stream) {
  constexpr int threads = 256;
  const unsigned blocks = detail::grid_for(n, threads);
  switch (y_type) {
    case host::Storage::f32: convert_kernel<<<blocks, threads, 0, stream>>>(x, static_cast<float*>(y), n); break;
    case host::Storage::bf16: convert_kernel<<<blocks, threads, 0, stream>>>(x, static_cast<__nv_bfloat16*>(y), n); break;
    case host::Storage::f16: convert_kernel<<<blocks, threads, 0, stream>>>(x, static_cast<__half*>(y), n); break;
    default: throw std::invalid_argument(std::string("copy_tensor: cannot convert to ") + host::name_of(y_type));
  }
  PERFSIM_CUDA_CHECK_LAUNCH();
}

// Where new row r of an append goes: a cache row, or −1 to skip it.
// Contiguous cache: r = b·seq_new + t -> b·capacity + position + t.
struct ContiguousRow {
  int64_t seq_new, capacity, position;
  __device__ int64_t operator()(int64_t r) const { return r / seq_new * capacity + position + r % seq_new; }
};
// Pages through a block table (paged_kv_append): a table entry outside the pool skips the row.
struct PagedRow {
  const int32_t* table;
  int64_t seq_new, position, block, max_blocks, num_blocks;
  __device__ int64_t operator()(int64_t r) const {
    const int64_t b = r / seq_new, j = position + r % seq_new;
    const int64_t page = table[b * max_blocks + j / block];
    return page < 0 || page >= num_blocks ? -1 : page * block + j % block;
  }
};
// Pool row slots[t] (varlen_kv_append): a negative slot (a token whose row is not kept, −1) and
// one past the pool are skipped.
struct SlotRow {
  const int32_t* slots;
  int64_t pool_rows;
  __device__ int64_t operator()(int64_t t) const {
    const int64_t slot = slots[t];
    return slot < 0 || slot >= pool_rows ? -1 : slot;
  }
};

// Block r copies new row r (`words` words W) to row to(r); 16-byte words when the row allows.
template <class W, class To>
__global__ void append_rows_kernel(const W* __restrict__ k_new, W* __restrict__ cache, int64_t words, To to) {
  const int64_t r = blockIdx.x, row = to(r);
  if (row < 0) return;
  W* dst = cache + row * words;
  const W* src = k_new + r * words;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
}

// Block r stores new row r (`row` elements of T) into fp8 cache row to(r) as e4m3(x / scale),
// round to nearest-even, saturated to ±448 (cvt.rn.satfinite); V elements (16 bytes of T) per
// thread and step, one at a time when the row does not allow.
template <class T, int V, class To>
__global__ void append_rows_fp8_kernel(const T* __restrict__ k_new, __nv_fp8_e4m3* __restrict__ cache, int64_t row,
                                       float scale, To to) {
  const int64_t r = blockIdx.x, dst_row = to(r);
  if (dst_row < 0) return;
  const T* src = k_new + r * row;
  auto* dst = reinterpret_cast<__nv_fp8_storage_t*>(cache) + dst_row * row;
  auto q = [scale](float x) { return __nv_cvt_float_to_fp8(x / scale, __NV_SATFINITE, __NV_E4M3); };
  if constexpr (V > 1) {
    for (int64_t i = int64_t(threadIdx.x) * V; i < row; i += int64_t(blockDim.x) * V) {
      float x[V];
      detail::load_f32<T, V>(src + i, x);
      detail::Pack<__nv_fp8_storage_t, V> out;
#pragma unroll
      for (int e = 0; e < V; ++e) out.v[e] = q(x[e]);
      *reinterpret_cast<detail::Pack<__nv_fp8_storage_t, V>*>(dst + i) = out;
    }
  } else {
    for (int64_t i = threadIdx.x; i < row; i += blockDim.x) dst[i] = q(detail::to_f32(src[i]));
  }
}

// Block i copies x row rows[i] to y row i (a row outside x leaves y's row as it was).
template <class W>
__global__ void gather_rows_kernel(const W* __restrict__ x, const int32_t* __restrict__ rows, W* __restrict__ y,
                                   int64_t words, int64_t x_rows) {
  const int64_t i = blockIdx.x, r = rows[i];
  if (r < 0 || r >= x_rows) return;
  const W* src = x + r * words;
  W* dst = y + i * words;
  for (int64_t k = threadIdx.x; k < words; k += blockDim.x) dst[k] = src[k];
}

// Threads for a block copying `words` words: a warp at least, 256 at most.
int copy_threads(int64_t words) {
  const int64_t t = (words + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : (t > 256 ? 256 : t));
}

// New rows [rows, row] of T into cache rows to(r) of C: copies of 16-byte words (or of
// elements) when C is T, e4m3(x / kv.scale) when C is fp8.
template <class T, class C, class To>
void append_rows(const T* k_new, C* cache, int64_t rows, int64_t row, const ops::KvStorage& kv, To to,
                 const char* who, cudaStream_t stream) {
  const float scale = detail::kv_scale_of<T, C>(kv, who);
  if (rows <= 0 || row <= 0) return;
  const auto blocks = static_cast<unsigned>(rows);
  constexpr int V = detail::vec_of<T>;
  if constexpr (detail::kv_is_fp8<T, C>) {
    if (row % V == 0 && detail::aligned(16, k_new) && detail::aligned(V, cache))
      append_rows_fp8_kernel<T, V><<<blocks, copy_threads(row / V), 0, stream>>>(k_new, cache, row, scale, to);
    else
      append_rows_fp8_kernel<T, 1><<<blocks, copy_threads(row), 0, stream>>>(k_new, cache, row, scale, to);
  } else {
    const int64_t bytes = row * int64_t(sizeof(T));
    if (bytes % 16 == 0 && detail::aligned(16, k_new, cache))
      append_rows_kernel<<<blocks, copy_threads(bytes / 16), 0, stream>>>(
          reinterpret_cast<const uint4*>(k_new), reinterpret_cast<uint4*>(cache), bytes / 16, to);
    else
      append_rows_kernel<<<blocks, copy_threads(row), 0, stream>>>(k_new, cache, row, to);
  }
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class T, class C>
void paged_kv_append(const T* k_new, C* pages, const int32_t* block_table, const ops::KvAppendShape& s,
                     const ops::PagedLayout& p, cudaStream_t stream) {
  if (s.position < 0 || s.position + s.seq_new > p.block * p.max_blocks)
    throw std::out_of_range("kv_append: rows " + std::to_string(s.position) + ".." +
                            std::to_string(s.position + s.seq_new - 1) + " do not fit " +
                            std::to_string(p.max_blocks) + " pages of " + std::to_string(p.block) + " rows");
  if (s.seq_new <= 0) return;
  append_rows(k_new, pages, s.batch * s.seq_new, s.row, s.kv,
              PagedRow{block_table, s.seq_new, s.position, p.block, p.max_blocks, p.num_blocks}, "paged_kv_append",
              stream);
}

template <class T, class C>
void kv_append_slots(const T* k_new, C* pages, const int32_t* slots, int64_t tokens, int64_t row,
                     int64_t pool_rows, cudaStream_t stream, const ops::KvStorage& kv) {
  append_rows(k_new, pages, tokens, row, kv, SlotRow{slots, pool_rows}, "kv_append_slots", stream);
}

template <class T>
void gather_rows(const T* x, const int32_t* rows, T* y, int64_t n, int64_t x_rows, int64_t cols,
                 cudaStream_t stream) {
  if (n <= 0 || cols <= 0) return;
  const int64_t bytes = cols * int64_t(sizeof(T));
  if (bytes % 16 == 0 && detail::aligned(16, x, y))
    gather_rows_kernel<<<static_cast<unsigned>(n), copy_threads(bytes / 16), 0, stream>>>(
        reinterpret_cast<const uint4*>(x), rows, reinterpret_cast<uint4*>(y), bytes / 16, x_rows);
  else
    gather_rows_kernel<<<static_cast<unsigned>(n), copy_threads(cols), 0, stream>>>(x, rows, y, cols, x_rows);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T, class C>
void kv_append(const T* k_new, C* cache, const ops::KvAppendShape& s, cudaStream_t stream) {
  if (s.position < 0 || s.position + s.seq_new > s.capacity)
    // (std::to_string: fmt's compile-time format checks do not build under nvcc)
    throw std::out_of_range("kv_append: rows " + std::to_string(s.position) + ".." +
                            std::to_string(s.position + s.seq_new - 1) + " do not fit a cache of " +
                            std::to_string(s.capacity) + " rows");
  if (s.batch <= 0 || s.seq_new <= 0 || s.row <= 0) return;
  if constexpr (detail::kv_is_fp8<T, C>) {  // quantized row by row
    append_rows(k_new, cache, s.batch * s.seq_new, s.row, s.kv, ContiguousRow{s.seq_new, s.capacity, s.position},
                "kv_append", stream);
  } else {  // a strided copy
    (void)detail::kv_scale_of<T, C>(s.kv, "kv_append");
    const auto width = static_cast<size_t>(s.seq_new * s.row) * sizeof(T);
    PERFSIM_CUDA_CHECK(cudaMemcpy2DAsync(cache + s.position * s.row,
                                         static_cast<size_t>(s.capacity * s.row) * sizeof(T), k_new,
                                         width, width, static_cast<size_t>(s.batch),
                                         cudaMemcpyDeviceToDevice, stream));
  }
}

template <class T>
void slice_last_token(const T* x, T* y, int64_t batch, int64_t seq, int64_t cols, cudaStream_t stream) {
  if (batch <= 0 || seq <= 0 || cols <= 0) return;
  const auto width = static_cast<size_t>(cols) * sizeof(T);
  PERFSIM_CUDA_CHECK(cudaMemcpy2DAsync(y, width, x + (seq - 1) * cols, static_cast<size_t>(seq) * width,
                                       width, static_cast<size_t>(batch), cudaMemcpyDeviceToDevice,
                                       stream));
}

void copy_tensor(const void* x, host::Storage x_type, void* y, host::Storage y_type, int64_t n,
                 cudaStream_t stream) {
  if (n <= 0) return;
  if (x_type == y_type) {
    PERFSIM_CUDA_CHECK(cudaMemcpyAsync(y, x, static_cast<size_t>(n) * static_cast<size_t>(host::bytes_of(x_type)),
                                       cudaMemcpyDeviceToDevice, stream));
    return;
  }
  switch (x_type) {
    case host::Storage::f32: convert_from(static_cast<const float*>(x), y, y_type, n, stream); break;
    case host::Storage::bf16: convert_from(static_cast<const __nv_bfloat16*>(x), y, y_type, n, stream); break;
    case host::Storage::f16: convert_from(static_cast<const __half*>(x), y, y_type, n, stream); break;
    default: throw std::invalid_argument(std::string("copy_tensor: cannot convert from ") + host::name_of(x_type));
  }
}

// The appends into a cache of C: T's own, or fp8.
#define PERFSIM_CUDA_INSTANTIATE_APPEND(T, C)                                                        \
  template void kv_append<T, C>(const T*, C*, const ops::KvAppendShape&, cudaStream_t);             \
  template void paged_kv_append<T, C>(const T*, C*, const int32_t*, const ops::KvAppendShape&,       \
                                      const ops::PagedLayout&, cudaStream_t);                        \
  template void kv_append_slots<T, C>(const T*, C*, const int32_t*, int64_t, int64_t, int64_t,      \
                                      cudaStream_t, const ops::KvStorage&);
#define PERFSIM_CUDA_INSTANTIATE_MEMORY(T)                                                    \
  PERFSIM_CUDA_INSTANTIATE_APPEND(T, T)                                                       \
  PERFSIM_CUDA_INSTANTIATE_APPEND(T, __nv_fp8_e4m3)                                           \
  template void slice_last_token<T>(const T*, T*, int64_t, int64_t, int64_t, cudaStream_t);  \
  template void gather_rows<T>(const T*, const int32_t*, T*, int64_t, int64_t, int64_t,      \
                               cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_MEMORY(float)
PERFSIM_CUDA_INSTANTIATE_MEMORY(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_MEMORY(__half)

}  // namespace perfsim::cuda
