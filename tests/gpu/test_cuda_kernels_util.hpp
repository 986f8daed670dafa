// Helpers of the CUDA kernel tests: device buffers, random host data in the CPU reference's
// storage types (host::bf16/half share their bit layout with __nv_bfloat16/__half, so bytes
// copy across unchanged), NaN poisoning of outputs, and the normalized max error.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cuda/cuda_check.hpp"

namespace perfsim::cuda::test {

// The CPU reference's storage type for a device element type.
template <class D> struct host_of { using type = float; };
template <> struct host_of<__nv_bfloat16> { using type = host::bf16; };
template <> struct host_of<__half> { using type = host::half; };
template <class D> using host_t = typename host_of<D>::type;

static_assert(sizeof(host::bf16) == sizeof(__nv_bfloat16) && sizeof(host::half) == sizeof(__half));

// Owns n elements of device memory.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t n) : m_n(n) {
    PERFSIM_CUDA_CHECK(cudaMalloc(&m_ptr, static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)));
  }
  template <class H>
  explicit DeviceBuffer(const std::vector<H>& host) : DeviceBuffer(static_cast<int64_t>(host.size())) {
    upload(host);
  }
  ~DeviceBuffer() { cudaFree(m_ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  [[nodiscard]] T* get() const { return m_ptr; }
  [[nodiscard]] int64_t size() const { return m_n; }

  template <class H>
  void upload(const std::vector<H>& host) {
    static_assert(sizeof(H) == sizeof(T));
    PERFSIM_CUDA_CHECK(cudaMemcpy(m_ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  // Fills with 0xFF bytes: NaN in every float type, so unwritten outputs fail comparisons.
  void poison() { PERFSIM_CUDA_CHECK(cudaMemset(m_ptr, 0xFF, static_cast<size_t>(m_n) * sizeof(T))); }
  template <class H = host_t<T>>
  [[nodiscard]] std::vector<H> download() const {
    std::vector<H> out(static_cast<size_t>(m_n));
    PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
    PERFSIM_CUDA_CHECK(cudaMemcpy(out.data(), m_ptr, out.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  T* m_ptr = nullptr;
  int64_t m_n = 0;
};

// n uniform values in [lo, hi), stored as H (rounded once, so host and device see the same bits).
template <class H>
[[nodiscard]] std::vector<H> random_values(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<H> out(static_cast<size_t>(n));
  for (auto& v : out) v = host::from_f32<H>(dist(rng));
  return out;
}

[[nodiscard]] inline std::vector<int32_t> random_ids(int64_t n, int32_t upper, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, upper - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = dist(rng);
  return out;
}

// max|got − want| / max|want| (NaN anywhere in `got` gives +inf: a poisoned output left unwritten).
template <class H>
[[nodiscard]] double normalized_error(const std::vector<H>& got, const std::vector<H>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = host::to_f32(got[i]), w = host::to_f32(want[i]);
    if (!std::isfinite(g) && std::isfinite(w)) return INFINITY;
    diff = std::max(diff, std::abs(g - w));
    scale = std::max(scale, std::abs(w));
  }
  return scale > 0 ? diff / scale : diff;
}

// Tolerance of a normalized error: fp32 kernels reassociate sums only slightly; 16-bit outputs
// are rounded to 8 (bf16) or 11 (fp16) significant bits, where one ulp of a large value is
// already ~4e-3.
template <class D> [[nodiscard]] constexpr double tolerance() {
  return std::is_same_v<D, float> ? 1e-5 : 1e-2;
}

}  // namespace perfsim::cuda::test
