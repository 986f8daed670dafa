// Times perfsim's CUDA attention kernels with CUDA events and prints one RESULT line per
// shape (median of the timed launches). FLOPs count the full seq_q × seq_kv rectangle even
// when causal (the project's convention, as Megatron): forward 4·b·H·sq·skv·d, backward
// 2.5× that. Decode reports GB/s of K/V read (the bytes that bound it).
//   bench_flash fwd|bwd|bwd_whole_group|decode|decode_cc|decode_tc dtype(bf16|fp16|fp32) b sq skv H Hkv d causal(0|1) [block_m] [iters]
// (bwd: block_m is the backward's kv tile, block_n of flash_attention_bwd, and the forward's;
// bwd_whole_group: the backward with one CTA per kv head over its whole GQA group; decode_cc,
// decode_tc: decode with its CUDA-core or its packed tensor-core kernel forced.)
// Host-only C++ (linked against perfsim_cuda) so it builds without CUDA enabled in bench/.
// bench/cuda/bench_attention.py runs it next to PyTorch SDPA on the same shapes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <type_traits>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/decode_attention.cuh"
#include "backends/cuda/kernels/flash_attention.cuh"

namespace {

using perfsim::ops::AttnShape;
namespace gpu = perfsim::cuda;

// Uniform values in [-1, 1) filled on the host (never zeros: zeros time faster).
template <class T> T* alloc_random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<T> h(size_t(std::max<int64_t>(n, 1)));
  for (auto& x : h) {
    const float f = dist(rng);
    if constexpr (std::is_same_v<T, float>) x = f;
    else if constexpr (std::is_same_v<T, __half>) x = __float2half_rn(f);
    else x = __float2bfloat16_rn(f);
  }
  void* p = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&p, h.size() * sizeof(T)));
  PERFSIM_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return static_cast<T*>(p);
}

template <class F> float median_ms(F&& launch, int iters) {
  for (int i = 0; i < 3; ++i) launch();  // warm-up: module load, smem attribute, caches
  cudaEvent_t e0, e1;
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e0));
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    PERFSIM_CUDA_CHECK(cudaEventRecord(e0));
    launch();
    PERFSIM_CUDA_CHECK(cudaEventRecord(e1));
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class T>
void run(const std::string& mode, const char* dtype, const AttnShape& a, int block_m, int iters) {
  const int64_t nq = a.batch * a.seq_q * a.heads * a.head_dim;
  const int64_t nkv = a.batch * a.kv_capacity * a.kv_heads * a.head_dim;
  T* q = alloc_random<T>(nq, 1);
  T* k = alloc_random<T>(nkv, 2);
  T* v = alloc_random<T>(nkv, 3);
  T* o = alloc_random<T>(nq, 4);
  T* d_o = alloc_random<T>(nq, 5);
  float* lse = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&lse, size_t(a.batch * a.heads * a.seq_q) * sizeof(float)));
  const double fwd_flops = 4.0 * a.batch * a.heads * a.seq_q * a.seq_kv * a.head_dim;
  float ms = 0;
  double rate = 0;
  const char* unit = "tflops";
  if (mode == "fwd") {
    ms = median_ms([&] { gpu::flash_attention(q, k, v, o, lse, a, nullptr, block_m); }, iters);
    rate = fwd_flops / (ms * 1e-3) / 1e12;
  } else if (mode == "bwd" || mode == "bwd_whole_group") {
    // bwd_whole_group: one CTA per kv head walking its GQA group (the backward before groups split).
    const bool split_group = mode == "bwd";
    gpu::flash_attention(q, k, v, o, lse, a, nullptr, block_m);
    T* dq = alloc_random<T>(nq, 6);
    T* dk = alloc_random<T>(nkv, 7);
    T* dv = alloc_random<T>(nkv, 8);
    void* ws = nullptr;
    PERFSIM_CUDA_CHECK(cudaMalloc(&ws, size_t(gpu::flash_attention_bwd_workspace_bytes(a, int(sizeof(T))))));
    ms = median_ms([&] { gpu::flash_attention_bwd(q, k, v, o, d_o, lse, dq, dk, dv, a, ws, nullptr, block_m, split_group); },
                   iters);
    rate = 2.5 * fwd_flops / (ms * 1e-3) / 1e12;
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(ws);
  } else if (mode == "decode" || mode == "decode_cc" || mode == "decode_tc") {
    void* ws = nullptr;
    PERFSIM_CUDA_CHECK(cudaMalloc(&ws, size_t(gpu::decode_attention_workspace_bytes(a))));
    const gpu::DecodeKernel kernel = mode == "decode_cc"   ? gpu::DecodeKernel::cuda_cores
                                     : mode == "decode_tc" ? gpu::DecodeKernel::tensor_cores
                                                           : gpu::DecodeKernel::automatic;
    ms = median_ms([&] { gpu::decode_attention(q, k, v, o, lse, a, ws, nullptr, kernel); }, iters);
    const double kv_bytes = 2.0 * a.batch * a.seq_kv * a.kv_heads * a.head_dim * sizeof(T);
    rate = kv_bytes / (ms * 1e-3) / 1e9;
    unit = "gbps";
    cudaFree(ws);
  } else {
    std::fprintf(stderr, "unknown mode %s (fwd, bwd, bwd_whole_group, decode, decode_cc, decode_tc)\n", mode.c_str());
    std::exit(2);
  }
  PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("RESULT mode=%s dtype=%s b=%lld sq=%lld skv=%lld h=%lld hkv=%lld d=%lld causal=%d "
              "block_m=%d ms=%.4f %s=%.2f\n",
              mode.c_str(), dtype, (long long)a.batch, (long long)a.seq_q, (long long)a.seq_kv,
              (long long)a.heads, (long long)a.kv_heads, (long long)a.head_dim, int(a.causal),
              block_m, ms, unit, rate);
  cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(d_o), cudaFree(lse);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 10) {
    std::fprintf(stderr,
                 "usage: %s fwd|bwd|bwd_whole_group|decode|decode_cc|decode_tc bf16|fp16|fp32 b sq skv H Hkv d causal "
                 "[block_m] [iters]\n",
                 argv[0]);
    return 2;
  }
  AttnShape a;
  const std::string mode = argv[1], dtype = argv[2];
  a.batch = std::atoll(argv[3]);
  a.seq_q = std::atoll(argv[4]);
  a.seq_kv = std::atoll(argv[5]);
  a.heads = std::atoll(argv[6]);
  a.kv_heads = std::atoll(argv[7]);
  a.head_dim = std::atoll(argv[8]);
  a.causal = std::atoi(argv[9]) != 0;
  a.kv_capacity = a.grad_capacity = a.seq_kv;
  const int block_m = argc > 10 ? std::atoi(argv[10]) : 0;
  const int iters = argc > 11 ? std::atoi(argv[11]) : 30;
  try {
    if (dtype == "bf16") run<__nv_bfloat16>(mode, "bf16", a, block_m, iters);
    else if (dtype == "fp16") run<__half>(mode, "fp16", a, block_m, iters);
    else if (dtype == "fp32") run<float>(mode, "fp32", a, block_m, iters);
    else {
      std::fprintf(stderr, "unknown dtype %s\n", dtype.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
