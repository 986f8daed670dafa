// AdamW (Loshchilov & Hutter 2019, decoupled weight decay) kernels: every element goes
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
//   p ← p − lr·(m·c1)/(√(v·c2) + eps), c1 = 1/(1−β1^t), c2 = 1/(1−β2^t);  weight ← p
// with each tensor kept in its own storage (fp32 master/states, bf16 grads/weights). A stage
// mask selects which of the four stages a kernel applies (unfused sweeps apply a subset).
#include <cmath>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/adamw.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"

namespace perfsim::cuda {

namespace {

using host::Storage;

enum Stage : unsigned { decay = 1, moment1 = 2, moment2 = 4, update = 8 };
constexpr int threads = 256;
constexpr int per_thread = 4;

struct Coeffs {
  float lr, beta1, beta2, eps, keep, c1, c2;
};

template <class T>
__device__ __forceinline__ void load4_as(const void* base, int64_t i, int64_t n, float (&out)[4]) {
  const T* p = static_cast<const T*>(base) + i;
  if (i + 4 <= n && reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(T)) == 0) {
    detail::load_f32<T, 4>(p, out);
  } else {
    for (int k = 0; k < 4; ++k) out[k] = i + k < n ? detail::to_f32(p[k]) : 0.0f;
  }
}
template <class T>
__device__ __forceinline__ void store4_as(void* base, int64_t i, int64_t n, const float (&in)[4]) {
  T* p = static_cast<T*>(base) + i;
  if (i + 4 <= n && reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(T)) == 0) {
    detail::store_f32<T, 4>(p, in);
  } else {
    for (int k = 0; k < 4; ++k)
      if (i + k < n) p[k] = detail::from_f32<T>(in[k]);
  }
}
__device__ __forceinline__ void load4(const void* base, Storage t, int64_t i, int64_t n, float (&out)[4]) {
  if (t == Storage::f32) load4_as<float>(base, i, n, out);
  else if (t == Storage::bf16) load4_as<__nv_bfloat16>(base, i, n, out);
  else load4_as<__half>(base, i, n, out);
}
__device__ __forceinline__ void store4(void* base, Storage t, int64_t i, int64_t n, const float (&in)[4]) {
  if (t == Storage::f32) store4_as<float>(base, i, n, in);
  else if (t == Storage::bf16) store4_as<__nv_bfloat16>(base, i, n, in);
  else store4_as<__half>(base, i, n, in);
}

// Elements one block of the per-tensor (unfused) kernels takes: one pass of its threads, so a
// small tensor spreads over blocks instead of one block looping over it (a block's passes
// wait on memory one after the other, so its time grew with the tensor far below the bandwidth).
constexpr int64_t unfused_chunk = threads * per_thread;

// Applies `stages` to work item `chunk` (elements [chunk·size, +size)) of g.
__device__ void run_chunk(const AdamWDeviceGroup& g, int64_t chunk, int64_t size, unsigned stages, const Coeffs& k) {
  const bool need_g = stages & (moment1 | moment2);
  const bool need_p = stages & (decay | update);
  const bool need_m = stages & (moment1 | update);
  const bool need_v = stages & (moment2 | update);
  const int64_t begin = chunk * size;
  const int64_t end = begin + size < g.n ? begin + size : g.n;
  for (int64_t i = begin + threadIdx.x * per_thread; i < end; i += threads * per_thread) {
    float p[4] = {}, gr[4] = {}, m[4] = {}, v[4] = {};
    if (need_p) load4(g.param, g.param_type, i, end, p);
    if (need_g) load4(g.grad, g.grad_type, i, end, gr);
    if (need_m) load4(g.m, g.m_type, i, end, m);
    if (need_v) load4(g.v, g.v_type, i, end, v);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (stages & decay) p[e] *= k.keep;
      if (stages & moment1) m[e] = k.beta1 * m[e] + (1.0f - k.beta1) * gr[e];
      if (stages & moment2) v[e] = k.beta2 * v[e] + (1.0f - k.beta2) * gr[e] * gr[e];
      if (stages & update) p[e] -= k.lr * (m[e] * k.c1) / (sqrtf(v[e] * k.c2) + k.eps);
    }
    if (need_p) store4(g.param, g.param_type, i, end, p);
    if (stages & moment1) store4(g.m, g.m_type, i, end, m);
    if (stages & moment2) store4(g.v, g.v_type, i, end, v);
    if ((stages & update) && g.weight != nullptr) store4(g.weight, g.weight_type, i, end, p);
  }
}

__global__ void adamw_fused_kernel(const AdamWDeviceGroup* __restrict__ groups, int64_t num_groups,
                                   int64_t total_chunks, Coeffs k) {
  for (int64_t chunk = blockIdx.x; chunk < total_chunks; chunk += gridDim.x) {
    // The last group whose first_chunk <= chunk (binary search over the prefix sums).
    int64_t lo = 0, hi = num_groups - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (groups[mid].first_chunk <= chunk) lo = mid;
      else hi = mid - 1;
    }
    const AdamWDeviceGroup g = groups[lo];
    run_chunk(g, chunk - g.first_chunk, adamw_chunk, decay | moment1 | moment2 | update, k);
  }
}

__global__ void adamw_group_kernel(AdamWDeviceGroup g, int64_t chunks, unsigned stages, Coeffs k) {
  for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) run_chunk(g, chunk, unfused_chunk, stages, k);
}

Coeffs coeffs_of(const ops::AdamWParams& p) {
  // Bias corrections in double, as the CPU reference computes them.
  const auto t = static_cast<double>(p.step);
  return {p.lr, p.beta1, p.beta2, p.eps, 1.0f - p.lr * p.weight_decay,
          static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(p.beta1), t))),
          static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(p.beta2), t)))};
}

int64_t chunks_of(int64_t n, int64_t size = adamw_chunk) { return (n + size - 1) / size; }

unsigned blocks_for(int64_t chunks) {
  const int64_t cap = static_cast<int64_t>(detail::sm_count()) * 8;
  return static_cast<unsigned>(chunks < 1 ? 1 : (chunks < cap ? chunks : cap));
}

AdamWDeviceGroup to_device(const ops::AdamWGroup& g) {
  AdamWDeviceGroup d;
  d.param = g.param;
  d.grad = g.grad;
  d.m = g.m;
  d.v = g.v;
  d.weight = g.weight;
  d.n = g.n;
  d.param_type = g.param_type;
  d.grad_type = g.grad_type;
  d.m_type = g.m_type;
  d.v_type = g.v_type;
  d.weight_type = g.weight_type;
  return d;
}

}  // namespace

std::vector<AdamWDeviceGroup> adamw_descriptors(const std::vector<ops::AdamWGroup>& groups) {
  std::vector<AdamWDeviceGroup> out;
  out.reserve(groups.size());
  int64_t next = 0;
  for (const ops::AdamWGroup& g : groups) {
    AdamWDeviceGroup d = to_device(g);
    d.first_chunk = next;
    next += chunks_of(g.n);
    out.push_back(d);
  }
  return out;
}

int64_t adamw_total_chunks(const std::vector<AdamWDeviceGroup>& groups) {
  return groups.empty() ? 0 : groups.back().first_chunk + chunks_of(groups.back().n);
}

void adamw_fused(const AdamWDeviceGroup* groups, int64_t num_groups, int64_t total_chunks,
                 const ops::AdamWParams& p, cudaStream_t stream) {
  if (num_groups <= 0 || total_chunks <= 0) return;
  adamw_fused_kernel<<<blocks_for(total_chunks), threads, 0, stream>>>(groups, num_groups,
                                                                       total_chunks, coeffs_of(p));
  PERFSIM_CUDA_CHECK_LAUNCH();
}

void adamw_unfused(const std::vector<ops::AdamWGroup>& groups, const ops::AdamWParams& p,
                   int passes, cudaStream_t stream) {
  constexpr unsigned stage_list[] = {decay, moment1, moment2, update};
  const int sweeps = passes < 1 ? 1 : (passes > 4 ? 4 : passes);
  const Coeffs k = coeffs_of(p);
  for (const ops::AdamWGroup& g : groups) {
    if (g.n <= 0) continue;
    const int64_t chunks = chunks_of(g.n, unfused_chunk);
    for (int sw = 0; sw < sweeps; ++sw) {
      unsigned stages = 0;  // stage s goes to sweep ⌊s·sweeps/4⌋, as on the CPU
      for (int s = 0; s < 4; ++s)
        if (s * sweeps / 4 == sw) stages |= stage_list[s];
      adamw_group_kernel<<<blocks_for(chunks), threads, 0, stream>>>(to_device(g), chunks, stages, k);
      PERFSIM_CUDA_CHECK_LAUNCH();
    }
  }
}

}  // namespace perfsim::cuda
