// Bandwidth of perfsim's memory-bound CUDA kernels on large operands (64 MiB and more): each
// kernel is timed with CUDA events, median over repeats after a warm-up, rotating between 4
// input/output sets so operands never stay in L2. Bytes = what the op must read + write;
// GB/s is compared with a device-to-device cudaMemcpy (read + write bytes) timed in the same
// run (first, and again last to show its drift); the norm backward rows include their partial
// sum kernel. Also the cost of an empty kernel launch and of a tiny eager rmsnorm, and rows at
// the shapes of model ops: RoPE over grouped K heads, many query heads and one decode token;
// AdamW sweeps over a norm's weights and a small projection. Prints a markdown table last;
// exits 0 (a report: the % column shows the ≥ 85% goal).
// `perfsim_cuda_bench --only PREFIX` times the copy and the rows whose kernel starts with PREFIX.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/adamw.cuh"
#include "backends/cuda/kernels/attention_materialized.cuh"
#include "backends/cuda/kernels/cross_entropy.cuh"
#include "backends/cuda/kernels/embedding.cuh"
#include "backends/cuda/kernels/norms.cuh"
#include "backends/cuda/kernels/pointwise.cuh"

namespace {

using bf16 = __nv_bfloat16;
namespace gpu = perfsim::cuda;
namespace cpu = perfsim::cpu;

constexpr int sets = 4, warmup = 3, repeats = 20;

__global__ void fill_kernel(bf16* p, int64_t n, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    p[i] = __float2bfloat16(static_cast<float>(h & 0xffff) / 32768.0f - 1.0f);
  }
}
__global__ void fill_f32_kernel(float* p, int64_t n, float lo, float span, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    p[i] = lo + span * static_cast<float>(h & 0xffff) / 65536.0f;
  }
}
__global__ void empty_kernel() {}

// Device memory freed at exit.
std::vector<void*> g_allocations;
template <class T>
T* alloc(int64_t n) {
  void* p = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(n) * sizeof(T)));
  g_allocations.push_back(p);
  return static_cast<T*>(p);
}
// `sets` buffers of n random bf16 each.
std::vector<bf16*> bf16_sets(int64_t n, uint32_t seed) {
  std::vector<bf16*> out;
  for (int s = 0; s < sets; ++s) {
    out.push_back(alloc<bf16>(n));
    fill_kernel<<<1024, 256>>>(out.back(), n, seed + 977u * s);
  }
  return out;
}
std::vector<float*> f32_sets(int64_t n, uint32_t seed, float lo = -1.0f, float span = 2.0f) {
  std::vector<float*> out;
  for (int s = 0; s < sets; ++s) {
    out.push_back(alloc<float>(n));
    fill_f32_kernel<<<1024, 256>>>(out.back(), n, lo, span, seed + 977u * s);
  }
  return out;
}

float* f32_one(int64_t n, uint32_t seed, float lo = -1.0f, float span = 2.0f) {
  float* p = alloc<float>(n);
  fill_f32_kernel<<<1024, 256>>>(p, n, lo, span, seed);
  return p;
}

struct Row {
  std::string kernel, dtype, shape;
  double bytes, median_us;
};
std::vector<Row> g_rows;
std::string g_only;  // --only: the kernel-name prefix to time ("" = every row)

bool selected(const std::string& kernel) {
  return g_only.empty() || kernel.rfind("D2D", 0) == 0 || kernel.rfind(g_only, 0) == 0;
}

// Median microseconds of fn(set) over `repeats` launches, each timed with its own events.
double time_us(const std::function<void(int)>& fn) {
  cudaEvent_t start, stop;
  PERFSIM_CUDA_CHECK(cudaEventCreate(&start));
  PERFSIM_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) fn(i % sets);
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    PERFSIM_CUDA_CHECK(cudaEventRecord(start));
    fn(i % sets);
    PERFSIM_CUDA_CHECK(cudaEventRecord(stop));
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    t.push_back(ms * 1e3);
  }
  PERFSIM_CUDA_CHECK(cudaEventDestroy(start));
  PERFSIM_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A tuning point, printed only (not in the table): median µs and % of the copy.
void sweep(const std::string& what, double bytes, double copy_gbs, const std::function<void(int)>& fn) {
  if (!selected(what)) return;
  const double us = time_us(fn);
  std::printf("sweep: %-44s %9.1f us %5.0f%% of copy\n", what.c_str(), us, 100.0 * bytes / us * 1e-3 / copy_gbs);
  std::fflush(stdout);
}

void bench(const std::string& kernel, const std::string& dtype, const std::string& shape, double bytes,
           const std::function<void(int)>& fn) {
  if (!selected(kernel)) return;
  const double us = time_us(fn);
  g_rows.push_back({kernel, dtype, shape, bytes, us});
  std::printf("%-28s %-5s %-26s %9.1f us %8.1f GB/s\n", kernel.c_str(), dtype.c_str(), shape.c_str(), us,
              bytes / us * 1e-3);
  std::fflush(stdout);
}

std::string dims(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--only") {
    g_only = argv[2];
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: perfsim_cuda_bench [--only KERNEL_PREFIX]\n");
    return 2;
  }
  try {
    cudaDeviceProp prop{};
    PERFSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

    const int64_t rows = 8192, cols = 4096, n = rows * cols;  // 32 Mi elements: 64 MiB in bf16
    const double e2 = 2.0 * static_cast<double>(n);             // bytes of one bf16 operand
    auto x = bf16_sets(n, 1), y = bf16_sets(n, 2), z = bf16_sets(n, 3), w = bf16_sets(n, 4);
    bf16* gamma = alloc<bf16>(cols);
    bf16* beta = alloc<bf16>(cols);
    fill_kernel<<<16, 256>>>(gamma, cols, 5);
    fill_kernel<<<16, 256>>>(beta, cols, 6);
    PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
    const std::string shape = dims(rows, cols);

    bench("D2D cudaMemcpy", "bf16", shape, 2 * e2, [&](int s) {
      PERFSIM_CUDA_CHECK(cudaMemcpyAsync(y[s], x[s], static_cast<size_t>(e2), cudaMemcpyDeviceToDevice));
    });
    const double copy_gbs = g_rows.back().bytes / g_rows.back().median_us * 1e-3;

    bench("residual_add", "bf16", shape, 3 * e2, [&](int s) { gpu::residual_add(x[s], y[s], z[s], n, nullptr); });
    bench("gelu", "bf16", shape, 2 * e2, [&](int s) { gpu::gelu(x[s], z[s], n, nullptr); });
    bench("gelu_bwd", "bf16", shape, 3 * e2, [&](int s) { gpu::gelu_bwd(x[s], y[s], z[s], n, nullptr); });
    bench("silu_mul", "bf16", shape, 3 * e2, [&](int s) { gpu::silu_mul(x[s], y[s], z[s], n, nullptr); });
    bench("silu_mul_bwd", "bf16", shape, 5 * e2, [&](int s) { gpu::silu_mul_bwd(x[s], y[s], z[s], w[s], w[(s + 1) % sets], n, nullptr); });
    bench("rmsnorm", "bf16", shape, 2 * e2, [&](int s) { gpu::rmsnorm(x[s], gamma, z[s], rows, cols, 1e-5f, nullptr); });
    bench("layernorm", "bf16", shape, 2 * e2, [&](int s) { gpu::layernorm(x[s], gamma, beta, z[s], rows, cols, 1e-5f, nullptr); });
    bench("add_rmsnorm", "bf16", shape, 4 * e2, [&](int s) { gpu::add_rmsnorm(x[s], y[s], gamma, z[s], w[s], rows, cols, 1e-5f, nullptr); });
    bench("add_layernorm", "bf16", shape, 4 * e2, [&](int s) { gpu::add_layernorm(x[s], y[s], gamma, beta, z[s], w[s], rows, cols, 1e-5f, nullptr); });
    {
      float* ws = alloc<float>(gpu::norm_bwd_workspace_floats(rows, cols));
      bench("rmsnorm_bwd", "bf16", shape, 3 * e2, [&](int s) { gpu::rmsnorm_bwd(x[s], gamma, y[s], z[s], w[s], rows, cols, 1e-5f, ws, nullptr); });
      bench("layernorm_bwd", "bf16", shape, 3 * e2, [&](int s) { gpu::layernorm_bwd(x[s], gamma, y[s], z[s], w[s], w[(s + 1) % sets], rows, cols, 1e-5f, ws, nullptr); });
      // The pipelined backward's packs per thread, rows per block reduction and blocks per
      // cluster summing their partials (2 blocks per SM).
      for (const bool layer : {false, true})
        for (const int packs : {1, 2})
          for (const int per_step : {1, 2})
            for (const int cluster : {1, 2, 4})
              sweep(std::string(layer ? "layernorm_bwd" : "rmsnorm_bwd") + " packs " + std::to_string(packs) +
                        " rows/step " + std::to_string(per_step) + " cluster " + std::to_string(cluster),
                    3 * e2, copy_gbs, [&](int s) {
                      const int64_t parts = gpu::detail::norm_bwd_pipelined(layer, x[s], gamma, y[s], z[s], ws, rows,
                                                                            cols, 1e-5f, nullptr, 2, per_step, packs,
                                                                            cluster);
                      gpu::detail::sum_partials(ws, w[s], parts, cols, nullptr, layer ? w[(s + 1) % sets] : nullptr);
                    });
    }
    {
      const ops::RopeShape r{.tokens = rows, .heads = 32, .head_dim = cols / 32, .seq = rows, .position = 0};
      bench("rope", "bf16", shape, 2 * e2, [&](int s) { gpu::rope(x[s], z[s], r, nullptr); });
      // Model shapes (head_dim 128): grouped K heads and many query heads over a long prompt,
      // one decode token, a small decode batch.
      struct RopeCase { int64_t tokens, heads; };
      for (const RopeCase c : {RopeCase{5120, 4}, RopeCase{5120, 20}, RopeCase{3000, 6}, RopeCase{1, 28},
                               RopeCase{32, 8}}) {
        const ops::RopeShape m{.tokens = c.tokens, .heads = c.heads, .head_dim = 128, .seq = c.tokens, .position = 0};
        bench("rope (model shape)", "bf16", dims(c.tokens, c.heads) + "x128", 2.0 * 2 * c.tokens * c.heads * 128,
              [&](int s) { gpu::rope(x[s], z[s], m, nullptr); });
      }
    }
    {
      // Scores of 32 heads × 1024 queries × 1024 keys: the same 32 Mi elements.
      const ops::AttnShape a{.batch = 1, .seq_q = 1024, .seq_kv = 1024, .heads = 32, .kv_heads = 32,
                             .head_dim = 128, .kv_capacity = 1024, .grad_capacity = 1024, .causal = false};
      bench("attn_softmax", "bf16", "1x32x1024x1024", 2 * e2, [&](int s) { gpu::attn_softmax(x[s], z[s], a, nullptr); });
      // Causal training shapes (8 heads, seq_q = seq_kv): rows of 80 to 256 packs of 8, one warp each.
      for (const int64_t skv : {int64_t{640}, int64_t{768}, int64_t{1000}, int64_t{1024}, int64_t{1280}, int64_t{2048}}) {
        const ops::AttnShape m{.batch = 1, .seq_q = skv, .seq_kv = skv, .heads = 8, .kv_heads = 8, .head_dim = 128,
                               .kv_capacity = skv, .grad_capacity = skv, .causal = true};
        bench("attn_softmax (model shape)", "bf16", "1x8x" + dims(skv, skv), 2.0 * 2 * 8 * skv * skv,
              [&](int s) { gpu::attn_softmax(x[s], z[s], m, nullptr); });
      }
      bench("attn_softmax_bwd", "bf16", "1x32x1024x1024", 3 * e2, [&](int s) { gpu::attn_softmax_bwd(x[s], y[s], z[s], a, nullptr); });
    }
    {
      const int64_t ce_cols = 50304, ce_rows = n / ce_cols;
      int32_t* targets = alloc<int32_t>(ce_rows);
      PERFSIM_CUDA_CHECK(cudaMemset(targets, 0, static_cast<size_t>(ce_rows) * sizeof(int32_t)));
      float* loss = alloc<float>(ce_rows);
      bench("cross_entropy (+dlogits)", "bf16", dims(ce_rows, ce_cols), 2.0 * 2 * ce_rows * ce_cols,
            [&](int s) { gpu::cross_entropy(x[s], targets, loss, z[s], ce_rows, ce_cols, nullptr); });
      // The loss alone (no gradient: one streaming read of the logits), against the same
      // copy: what the gradient sweep adds on top.
      sweep("cross_entropy loss only (read 64 MiB)", 2.0 * ce_rows * ce_cols, copy_gbs,
            [&](int s) { gpu::cross_entropy(x[s], targets, loss, nullptr, ce_rows, ce_cols, nullptr); });
    }
    {
      const int64_t vocab = 32000, tokens = rows;
      const ops::EmbeddingShape e{.tokens = tokens, .vocab = vocab, .hidden = cols, .seq = tokens};
      bf16* table = alloc<bf16>(vocab * cols);
      fill_kernel<<<1024, 256>>>(table, vocab * cols, 7);
      int32_t* ids = alloc<int32_t>(tokens);
      std::vector<int32_t> h_ids(static_cast<size_t>(tokens));
      for (int64_t t = 0; t < tokens; ++t) h_ids[static_cast<size_t>(t)] = static_cast<int32_t>((t * 7919) % vocab);
      PERFSIM_CUDA_CHECK(cudaMemcpy(ids, h_ids.data(), h_ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
      bench("embedding", "bf16", dims(tokens, cols), 2 * e2, [&](int s) { gpu::embedding(ids, table, nullptr, z[s], e, nullptr); });
    }
    {
      // fp32 rmsnorm on the same element count (128 MiB operands).
      auto xf = f32_sets(n, 8), yf = f32_sets(n, 9);
      float* gf = alloc<float>(cols);
      fill_f32_kernel<<<16, 256>>>(gf, cols, 0.5f, 1.0f, 10);
      bench("rmsnorm", "fp32", shape, 2 * 2 * e2, [&](int s) { gpu::rmsnorm(xf[s], gf, yf[s], rows, cols, 1e-5f, nullptr); });
      bench("residual_add", "fp32", shape, 3 * 2 * e2, [&](int s) { gpu::residual_add(xf[s], yf[s], yf[(s + 1) % sets], n, nullptr); });
    }
    {
      // AdamW over 16 Mi fp32 parameters in 8 tensors: params, grads, m, v all fp32.
      const int64_t tensors = 8, per = (int64_t{1} << 24) / tensors;
      std::vector<std::vector<ops::AdamWGroup>> groups(sets);
      std::vector<gpu::AdamWDeviceGroup*> descs(sets);
      int64_t chunks = 0;
      for (int s = 0; s < sets; ++s) {
        for (int64_t t = 0; t < tensors; ++t) {
          ops::AdamWGroup g;
          g.param = f32_one(per, 20 + t + 100 * s);
          g.grad = f32_one(per, 30 + t + 100 * s);
          g.m = f32_one(per, 40 + t + 100 * s, -0.1f, 0.2f);
          g.v = f32_one(per, 50 + t + 100 * s, 0.0f, 0.01f);
          g.weight = nullptr;
          g.n = per;
          groups[s].push_back(g);
        }
        const auto d = gpu::adamw_descriptors(groups[s]);
        chunks = gpu::adamw_total_chunks(d);
        descs[s] = static_cast<gpu::AdamWDeviceGroup*>(static_cast<void*>(alloc<uint8_t>(gpu::adamw_workspace_bytes(tensors))));
        PERFSIM_CUDA_CHECK(cudaMemcpy(descs[s], d.data(), d.size() * sizeof(d[0]), cudaMemcpyHostToDevice));
      }
      const ops::AdamWParams p{};
      const double elems = static_cast<double>(tensors * per);
      bench("adamw fused (1 launch)", "fp32", "8x2Mi", elems * 4 * 7,  // read p,g,m,v; write p,m,v
            [&](int s) { gpu::adamw_fused(descs[s], tensors, chunks, p, nullptr); });
      bench("adamw unfused (4 sweeps)", "fp32", "8x2Mi", elems * 4 * 12,  // decay 2, m 3, v 3, update 4
            [&](int s) { gpu::adamw_unfused(groups[s], p, 4, nullptr); });
      // One small tensor: a norm's weights, a small projection (the sweeps' launches and
      // latency, not bandwidth, set these; their four sets stay in L2).
      for (const int64_t small : {int64_t{3584}, int64_t{327680}}) {
        std::vector<std::vector<ops::AdamWGroup>> one(sets);
        for (int s = 0; s < sets; ++s) {
          one[s] = {groups[s][0]};
          one[s][0].n = small;
        }
        bench("adamw unfused (4 sweeps)", "fp32", std::to_string(small), static_cast<double>(small) * 4 * 12,
              [&](int s) { gpu::adamw_unfused(one[s], p, 4, nullptr); });
      }
    }

    // The copy again, last: how far the reference drifted during the run (clocks, heat).
    bench("D2D cudaMemcpy (end of run)", "bf16", shape, 2 * e2, [&](int s) {
      PERFSIM_CUDA_CHECK(cudaMemcpyAsync(y[s], x[s], static_cast<size_t>(e2), cudaMemcpyDeviceToDevice));
    });

    // Launch overheads: back-to-back launches, average per launch.
    const int launches = 2000;
    cudaEvent_t a, b;
    PERFSIM_CUDA_CHECK(cudaEventCreate(&a));
    PERFSIM_CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 100; ++i) empty_kernel<<<1, 32>>>();
    PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
    auto host0 = std::chrono::steady_clock::now();
    PERFSIM_CUDA_CHECK(cudaEventRecord(a));
    for (int i = 0; i < launches; ++i) empty_kernel<<<1, 32>>>();
    PERFSIM_CUDA_CHECK(cudaEventRecord(b));
    auto host1 = std::chrono::steady_clock::now();
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    const double empty_gpu_us = ms * 1e3 / launches;
    const double empty_host_us = std::chrono::duration<double, std::micro>(host1 - host0).count() / launches;

    bf16* tiny_x = alloc<bf16>(cols);
    bf16* tiny_y = alloc<bf16>(cols);
    fill_kernel<<<16, 256>>>(tiny_x, cols, 11);
    for (int i = 0; i < 100; ++i) gpu::rmsnorm(tiny_x, gamma, tiny_y, 1, cols, 1e-5f, nullptr);
    PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
    host0 = std::chrono::steady_clock::now();
    PERFSIM_CUDA_CHECK(cudaEventRecord(a));
    for (int i = 0; i < launches; ++i) gpu::rmsnorm(tiny_x, gamma, tiny_y, 1, cols, 1e-5f, nullptr);
    PERFSIM_CUDA_CHECK(cudaEventRecord(b));
    host1 = std::chrono::steady_clock::now();
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(b));
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    const double tiny_gpu_us = ms * 1e3 / launches;
    const double tiny_host_us = std::chrono::duration<double, std::micro>(host1 - host0).count() / launches;

    std::printf("\n## GPU kernel bandwidth (%s; D2D copy %.0f GB/s)\n\n", prop.name, copy_gbs);
    std::printf("| kernel | dtype | shape | MiB moved | median µs | GB/s | %% of D2D copy |\n|---|---|---|---|---|---|---|\n");
    for (const Row& r : g_rows) {
      const double gbs = r.bytes / r.median_us * 1e-3;
      std::printf("| %s | %s | %s | %.0f | %.1f | %.0f | %.0f%% |\n", r.kernel.c_str(), r.dtype.c_str(), r.shape.c_str(),
                  r.bytes / (1 << 20), r.median_us, gbs, 100.0 * gbs / copy_gbs);
    }
    std::printf("\n| launch overhead (%d back-to-back launches) | GPU µs per launch | host µs per launch call |\n|---|---|---|\n", launches);
    std::printf("| empty kernel | %.2f | %.2f |\n", empty_gpu_us, empty_host_us);
    std::printf("| rmsnorm 1x%lld bf16 (eager) | %.2f | %.2f |\n", static_cast<long long>(cols), tiny_gpu_us, tiny_host_us);
  } catch (const std::exception& e) {
    std::printf("perfsim_cuda_bench: %s\n", e.what());
  }
  for (void* p : g_allocations) cudaFree(p);
  return 0;
}
