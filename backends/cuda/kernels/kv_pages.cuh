// A disaggregated engine's KV hand-off on the GPU: the pages of some blocks of a pool, every
// layer's K and V, gathered into one contiguous message (tensor by tensor, block by block, as
// cpu::send_kv_pages lays it out) and scattered back into blocks of another pool. One kernel
// each, a CUDA block per (page tensor, pool block), 16-byte copies where the block's bytes
// allow. Asynchronous on `stream`.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace perfsim::cuda {

// `tensors`: device array of the page tensors' addresses; `blocks`: device array of block ids
// (checked on the host); message: tensors × blocks × block_bytes of device memory.
void gather_kv_pages(void* const* tensors, const int64_t* blocks, int64_t tensor_count, int64_t block_count,
                     std::size_t block_bytes, void* message, cudaStream_t stream);
void scatter_kv_pages(void* const* tensors, const int64_t* blocks, int64_t tensor_count, int64_t block_count,
                      std::size_t block_bytes, const void* message, cudaStream_t stream);

}  // namespace perfsim::cuda
