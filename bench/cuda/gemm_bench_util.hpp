// Helpers of the GEMM benchmarks: operand buffers of small finite values, and the median
// GPU time of a launch over rotating input sets.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cuda/cuda_check.hpp"

namespace perfsim::bench {

// Pseudo-random bytes every element type reads as a small finite value: e4m3 in ±[2^-1, 2),
// for 2/4-byte floats the high byte in [0x3c, 0x3f] or its negative. A 16 MiB host block is
// generated once per seed and copied over the buffer.
inline void* alloc_filled(std::size_t bytes, int elem_bytes, uint32_t seed) {
  constexpr std::size_t block = 16u << 20;
  std::vector<unsigned char> h(std::min(bytes, block));
  uint32_t x = seed * 2654435761u + 1u;
  for (std::size_t i = 0; i < h.size(); ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;  // xorshift32
    auto b = static_cast<unsigned char>(x >> 8);
    if (elem_bytes == 1) b = static_cast<unsigned char>((b & 0x80) | (0x30 + (b & 0x0f)));
    else if (i % static_cast<std::size_t>(elem_bytes) == static_cast<std::size_t>(elem_bytes - 1))
      b = static_cast<unsigned char>((b & 0x80) | (0x3c + (b & 0x03)));
    h[i] = b;
  }
  void* p = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&p, bytes));
  for (std::size_t off = 0; off < bytes; off += h.size())
    PERFSIM_CUDA_CHECK(cudaMemcpy(static_cast<unsigned char*>(p) + off, h.data(), std::min(h.size(), bytes - off),
                                  cudaMemcpyHostToDevice));
  return p;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median GPU time (seconds) of launch(r), r rotating over the input sets.
template <class F>
double time_median(F&& launch, int sets, int iters, cudaEvent_t e0, cudaEvent_t e1) {
  for (int i = 0; i < 3; ++i) launch(i % sets);
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    PERFSIM_CUDA_CHECK(cudaEventRecord(e0));
    launch(i % sets);
    PERFSIM_CUDA_CHECK(cudaEventRecord(e1));
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e-3);
  }
  return median(t);
}

}  // namespace perfsim::bench
