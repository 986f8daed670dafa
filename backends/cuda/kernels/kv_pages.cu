// Gathering KV pages into a message and scattering a message into pages (kv_pages.cuh).
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kv_pages.cuh"

namespace perfsim::cuda {

namespace {

// blockIdx.x: the block's place in `blocks`; blockIdx.y: the page tensor.
template <bool gather>
__global__ void kv_pages_kernel(void* const* __restrict__ tensors, const int64_t* __restrict__ blocks,
                                int64_t block_count, std::size_t block_bytes, char* __restrict__ message) {
  char* page = static_cast<char*>(tensors[blockIdx.y]) + static_cast<std::size_t>(blocks[blockIdx.x]) * block_bytes;
  char* part = message + (static_cast<std::size_t>(blockIdx.y) * block_count + blockIdx.x) * block_bytes;
  const char* from = gather ? page : part;
  char* to = gather ? part : page;
  const bool wide = block_bytes % 16 == 0 && reinterpret_cast<std::uintptr_t>(from) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(to) % 16 == 0;
  if (wide) {
    const auto* f = reinterpret_cast<const uint4*>(from);
    auto* t = reinterpret_cast<uint4*>(to);
    for (std::size_t i = threadIdx.x; i < block_bytes / 16; i += blockDim.x) t[i] = f[i];
  } else {
    for (std::size_t i = threadIdx.x; i < block_bytes; i += blockDim.x) to[i] = from[i];
  }
}

template <bool gather>
void launch(void* const* tensors, const int64_t* blocks, int64_t tensor_count, int64_t block_count,
            std::size_t block_bytes, void* message, cudaStream_t stream) {
  if (tensor_count <= 0 || block_count <= 0 || block_bytes == 0) return;
  const dim3 grid(static_cast<unsigned>(block_count), static_cast<unsigned>(tensor_count));
  kv_pages_kernel<gather><<<grid, 256, 0, stream>>>(tensors, blocks, block_count, block_bytes,
                                                    static_cast<char*>(message));
  PERFSIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gather_kv_pages(void* const* tensors, const int64_t* blocks, int64_t tensor_count, int64_t block_count,
                     std::size_t block_bytes, void* message, cudaStream_t stream) {
  launch<true>(tensors, blocks, tensor_count, block_count, block_bytes, message, stream);
}

void scatter_kv_pages(void* const* tensors, const int64_t* blocks, int64_t tensor_count, int64_t block_count,
                      std::size_t block_bytes, const void* message, cudaStream_t stream) {
  launch<false>(tensors, blocks, tensor_count, block_count, block_bytes, const_cast<void*>(message), stream);
}

}  // namespace perfsim::cuda
