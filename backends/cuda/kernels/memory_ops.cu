// KV-cache append and last-token slice as strided device-to-device copies, the paged append
// as a kernel (its rows scatter through a block table), the varlen append and gather as
// kernels of one block per row (rows scatter to slots / gather from indices on the device),
// and dtype conversion as a grid-stride kernel. Shapes in memory_ops.cuh.
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

// Block r copies new row r = b·seq_new + t to its page row; 16-byte words when the row allows.
template <class W>
__global__ void paged_append_kernel(const W* __restrict__ k_new, W* __restrict__ pages,
                                    const int32_t* __restrict__ table, int64_t seq_new, int64_t position,
                                    int64_t words, int64_t block, int64_t max_blocks, int64_t num_blocks) {
  const int64_t r = blockIdx.x, b = r / seq_new, j = position + r % seq_new;
  const int64_t page = table[b * max_blocks + j / block];
  if (page < 0 || page >= num_blocks) return;
  W* dst = pages + (page * block + j % block) * words;
  const W* src = k_new + r * words;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
}

// Block t copies row t of k_new to pool row slots[t]; a negative slot (a token whose row is
// not kept, −1) and one past the pool are skipped.
template <class W>
__global__ void slot_append_kernel(const W* __restrict__ k_new, W* __restrict__ pages,
                                   const int32_t* __restrict__ slots, int64_t words, int64_t pool_rows) {
  const int64_t t = blockIdx.x, slot = slots[t];
  if (slot < 0 || slot >= pool_rows) return;
  W* dst = pages + slot * words;
  const W* src = k_new + t * words;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
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

}  // namespace

template <class T>
void paged_kv_append(const T* k_new, T* pages, const int32_t* block_table, const ops::KvAppendShape& s,
                     const ops::PagedLayout& p, cudaStream_t stream) {
  if (s.position < 0 || s.position + s.seq_new > p.block * p.max_blocks)
    throw std::out_of_range("kv_append: rows " + std::to_string(s.position) + ".." +
                            std::to_string(s.position + s.seq_new - 1) + " do not fit " +
                            std::to_string(p.max_blocks) + " pages of " + std::to_string(p.block) + " rows");
  if (s.batch <= 0 || s.seq_new <= 0 || s.row <= 0) return;
  const auto blocks = static_cast<unsigned>(s.batch * s.seq_new);
  const int64_t bytes = s.row * int64_t(sizeof(T));
  if (bytes % 16 == 0)
    paged_append_kernel<<<blocks, 128, 0, stream>>>(reinterpret_cast<const uint4*>(k_new),
                                                    reinterpret_cast<uint4*>(pages), block_table, s.seq_new,
                                                    s.position, bytes / 16, p.block, p.max_blocks, p.num_blocks);
  else
    paged_append_kernel<<<blocks, 128, 0, stream>>>(k_new, pages, block_table, s.seq_new, s.position, s.row,
                                                    p.block, p.max_blocks, p.num_blocks);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void kv_append_slots(const T* k_new, T* pages, const int32_t* slots, int64_t tokens, int64_t row,
                     int64_t pool_rows, cudaStream_t stream) {
  if (tokens <= 0 || row <= 0) return;
  const int64_t bytes = row * int64_t(sizeof(T));
  if (bytes % 16 == 0 && detail::aligned(16, k_new, pages))
    slot_append_kernel<<<static_cast<unsigned>(tokens), copy_threads(bytes / 16), 0, stream>>>(
        reinterpret_cast<const uint4*>(k_new), reinterpret_cast<uint4*>(pages), slots, bytes / 16, pool_rows);
  else
    slot_append_kernel<<<static_cast<unsigned>(tokens), copy_threads(row), 0, stream>>>(k_new, pages, slots, row,
                                                                                       pool_rows);
  PERFSIM_CUDA_CHECK_LAUNCH();
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

template <class T>
void kv_append(const T* k_new, T* cache, const ops::KvAppendShape& s, cudaStream_t stream) {
  if (s.position < 0 || s.position + s.seq_new > s.capacity)
    // (std::to_string: fmt's compile-time format checks do not build under nvcc)
    throw std::out_of_range("kv_append: rows " + std::to_string(s.position) + ".." +
                            std::to_string(s.position + s.seq_new - 1) + " do not fit a cache of " +
                            std::to_string(s.capacity) + " rows");
  if (s.batch <= 0 || s.seq_new <= 0 || s.row <= 0) return;
  const auto width = static_cast<size_t>(s.seq_new * s.row) * sizeof(T);
  PERFSIM_CUDA_CHECK(cudaMemcpy2DAsync(cache + s.position * s.row,
                                       static_cast<size_t>(s.capacity * s.row) * sizeof(T), k_new,
                                       width, width, static_cast<size_t>(s.batch),
                                       cudaMemcpyDeviceToDevice, stream));
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

#define PERFSIM_CUDA_INSTANTIATE_MEMORY(T)                                                    \
  template void kv_append<T>(const T*, T*, const ops::KvAppendShape&, cudaStream_t);         \
  template void paged_kv_append<T>(const T*, T*, const int32_t*, const ops::KvAppendShape&,   \
                                   const ops::PagedLayout&, cudaStream_t);                    \
  template void slice_last_token<T>(const T*, T*, int64_t, int64_t, int64_t, cudaStream_t);  \
  template void kv_append_slots<T>(const T*, T*, const int32_t*, int64_t, int64_t, int64_t,  \
                                   cudaStream_t);                                            \
  template void gather_rows<T>(const T*, const int32_t*, T*, int64_t, int64_t, int64_t,      \
                               cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_MEMORY(float)
PERFSIM_CUDA_INSTANTIATE_MEMORY(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_MEMORY(__half)

}  // namespace perfsim::cuda
