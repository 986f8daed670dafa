// Softmax cross-entropy on the GPU, mirroring cpu::cross_entropy (backends/cpu/cpu_kernels.hpp):
// logits [rows, cols]; targets [rows] int32; loss [rows] fp32 = −log softmax(logits)[target];
// dlogits [rows, cols] (optional, may be null) = (softmax − onehot(target)) / mean_rows: the
// gradient of the mean loss over mean_rows rows (0: rows; more when micro-batches share the
// mean, OpAttrs::loss_rows).
// Targets are not range-checked on the device: an out-of-range target gives a NaN loss.
// Asynchronous on `stream`, capturable.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace perfsim::cuda {

template <class T> void cross_entropy(const T* logits, const int32_t* targets, float* loss,
                                      std::type_identity_t<T>* dlogits, int64_t rows, int64_t cols,
                                      cudaStream_t stream, int64_t mean_rows = 0);

}  // namespace perfsim::cuda
