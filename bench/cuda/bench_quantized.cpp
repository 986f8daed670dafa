// Quantized-weight GEMMs against the bf16 GEMM they replace, at decode's few rows: the fused
// dequantizing kernel (int4 in groups of 128 with zero points, int8 per channel) for Llama-3-8B's
// linear layers and lm_head, the dequantize-then-cuBLASLt path the backend takes beyond 8 rows,
// W8A8's int8 GEMM, and cuBLASLt's bf16 GEMM (perfsim's GemmEngine, autotuned). Each row gives
// the bytes the kernel must read, its median time (CUDA events, warm-up, weights rotating over
// copies that together exceed L2; 20 launches back to back per timing) and its roofline share: bytes / time over the device-to-device
// copy bandwidth measured in the same run.
//   bench_quantized [iters=50]
// A report: exits 0 unless a CUDA call fails. The markdown table is printed last.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/common/quantized_weights.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "backends/cuda/cuda_quantized_gemm.hpp"
#include "bench/cuda/gemm_bench_util.hpp"

namespace {

namespace gpu = perfsim::cuda;
using perfsim::bench::alloc_filled;

// Median GPU time of one launch: launches back to back between two events, 20 at a time over
// the rotating weights (a lone decode GEMM of a few µs would otherwise time the launch gap).
template <class F>
double time_median(F&& launch, int sets, int iters, cudaEvent_t e0, cudaEvent_t e1) {
  constexpr int per_timing = 20;
  for (int i = 0; i < 3; ++i) launch(i % sets);
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    PERFSIM_CUDA_CHECK(cudaEventRecord(e0));
    for (int j = 0; j < per_timing; ++j) launch((i * per_timing + j) % sets);
    PERFSIM_CUDA_CHECK(cudaEventRecord(e1));
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e-3 / per_timing);
  }
  return perfsim::bench::median(t);
}

struct Shape {
  const char* name;
  int64_t k, n;
};

struct Row {
  std::string layer, path;
  int64_t m = 0, k = 0, n = 0;
  double bytes = 0, seconds = 0;
};

constexpr std::size_t rotate_bytes = 256u << 20;  // weight copies per case: at least this much

// The graph's tensor of a [k, n] weight in int4 (groups with zero points) or int8: its layout
// (host::quant_layout) and device view (cuda::quant_view) come from it, as the backend's do.
perfsim::Tensor weight_tensor(int64_t k, int64_t n, bool int4, int64_t group) {
  perfsim::Tensor t;
  t.shape = {k, n};
  t.dtype = int4 ? perfsim::DType::int4 : perfsim::DType::int8;
  t.quant_group = group;
  t.quant_zeros = int4;
  return t;
}

// Device copies of one random quantized weight (host layout, filled once; W8A8's values [N, K]).
std::vector<void*> quantized_copies(const perfsim::Tensor& t, bool transposed_values) {
  const perfsim::host::QuantLayout q = perfsim::host::quant_layout(t);
  std::vector<unsigned char> h(q.bytes());
  perfsim::host::fill_quantized(h.data(), q, 7);
  if (transposed_values) {
    std::vector<unsigned char> nk(h.size());
    gpu::transpose_quantized_values(t, h.data(), nk.data(), true);
    h.swap(nk);
  }
  const int copies = static_cast<int>(std::max<std::size_t>(2, rotate_bytes / h.size() + 1));
  std::vector<void*> out;
  for (int i = 0; i < std::min(copies, 16); ++i) {
    void* p = nullptr;
    PERFSIM_CUDA_CHECK(cudaMalloc(&p, h.size()));
    PERFSIM_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size(), cudaMemcpyHostToDevice));
    out.push_back(p);
  }
  return out;
}

double copy_bandwidth(int iters, cudaEvent_t e0, cudaEvent_t e1) {
  const std::size_t bytes = 1u << 30;
  void *a = nullptr, *b = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&a, bytes));
  PERFSIM_CUDA_CHECK(cudaMalloc(&b, bytes));
  PERFSIM_CUDA_CHECK(cudaMemset(a, 1, bytes));
  const double s = time_median([&](int) { PERFSIM_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); },
                               1, iters, e0, e1);
  PERFSIM_CUDA_CHECK(cudaFree(a));
  PERFSIM_CUDA_CHECK(cudaFree(b));
  return 2.0 * static_cast<double>(bytes) / s;  // read and written
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e0));
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e1));
  const double copy_bw = copy_bandwidth(iters, e0, e1);
  std::printf("device-to-device copy: %.0f GB/s\n", copy_bw / 1e9);

  const std::vector<Shape> shapes = {{"q/o_proj", 4096, 4096},  {"k/v_proj", 4096, 1024},  {"gate/up_proj", 4096, 14336},
                                     {"down_proj", 14336, 4096}, {"lm_head", 4096, 128256}};
  gpu::GemmEngine gemm;
  std::vector<Row> rows;
  for (const Shape& sh : shapes) {
    const int64_t k = sh.k, n = sh.n;
    for (const int64_t m : {int64_t{1}, int64_t{8}, int64_t{16}}) {
      void* a = alloc_filled(static_cast<std::size_t>(m * k) * 2, 2, 3);
      void* c = nullptr;
      PERFSIM_CUDA_CHECK(cudaMalloc(&c, static_cast<std::size_t>(m * n) * 4));
      // bf16: cuBLASLt through the engine (autotuned at its first call).
      {
        const std::size_t wb = static_cast<std::size_t>(k * n) * 2;
        std::vector<void*> ws;
        for (std::size_t i = 0; i < std::max<std::size_t>(2, rotate_bytes / wb + 1) && i < 16; ++i)
          ws.push_back(alloc_filled(wb, 2, 11u + static_cast<uint32_t>(i)));
        perfsim::ops::GemmShape s;
        s.m = m, s.n = n, s.k = k;
        const double t = time_median(
            [&](int r) {
              gemm.gemm({a, gpu::Elem::bf16, nullptr}, {ws[static_cast<std::size_t>(r)], gpu::Elem::bf16, nullptr}, c,
                        gpu::Elem::bf16, s, false, nullptr);
            },
            static_cast<int>(ws.size()), iters, e0, e1);
        rows.push_back({sh.name, "bf16 cuBLASLt", m, k, n, static_cast<double>(wb), t});
        for (void* p : ws) PERFSIM_CUDA_CHECK(cudaFree(p));
      }
      for (const bool int4 : {true, false}) {
        const int64_t group = int4 ? 128 : k;
        const perfsim::Tensor weight = weight_tensor(k, n, int4, group);
        std::vector<void*> ws = quantized_copies(weight, false);
        const gpu::QuantWeightView v0 = gpu::quant_view(weight, ws[0]);
        const double bytes = static_cast<double>(perfsim::host::quant_layout(weight).bytes());
        if (gpu::quantized_gemv_fits(v0, m)) {
          const int64_t splits = gpu::quantized_gemv_splits_here(n, k);
          const double t = time_median(
              [&](int r) {
                gpu::quantized_gemv(a, gpu::Elem::bf16, m, gpu::quant_view(weight, ws[static_cast<std::size_t>(r)]),
                                    splits, c, gpu::Elem::bf16, false, nullptr);
              },
              static_cast<int>(ws.size()), iters, e0, e1);
          rows.push_back({sh.name, std::string(int4 ? "int4" : "int8") + " fused", m, k, n, bytes, t});
        } else {
          void* dense = nullptr;
          PERFSIM_CUDA_CHECK(cudaMalloc(&dense, static_cast<std::size_t>(k * n) * 2));
          perfsim::ops::GemmShape s;
          s.m = m, s.n = n, s.k = k;
          const double t = time_median(
              [&](int r) {
                gpu::dequantize_weight(gpu::quant_view(weight, ws[static_cast<std::size_t>(r)]), dense,
                                       gpu::Elem::bf16, nullptr);
                gemm.gemm({a, gpu::Elem::bf16, nullptr}, {dense, gpu::Elem::bf16, nullptr}, c, gpu::Elem::bf16, s,
                          false, nullptr);
              },
              static_cast<int>(ws.size()), iters, e0, e1);
          rows.push_back({sh.name, std::string(int4 ? "int4" : "int8") + " dequantized", m, k, n, bytes, t});
          PERFSIM_CUDA_CHECK(cudaFree(dense));
        }
        for (void* p : ws) PERFSIM_CUDA_CHECK(cudaFree(p));
      }
      // W8A8: activations quantized per row, cuBLASLt int8, scales applied.
      {
        const perfsim::Tensor weight = weight_tensor(k, n, false, k);
        std::vector<void*> ws = quantized_copies(weight, true);
        const perfsim::host::QuantLayout q = perfsim::host::quant_layout(weight);
        int8_t* qa = nullptr;
        float* row_scales = nullptr;
        int32_t* acc = nullptr;
        PERFSIM_CUDA_CHECK(cudaMalloc(&qa, static_cast<std::size_t>(m * k)));
        PERFSIM_CUDA_CHECK(cudaMalloc(&row_scales, static_cast<std::size_t>(m) * 4));
        PERFSIM_CUDA_CHECK(cudaMalloc(&acc, static_cast<std::size_t>(m * n) * 4));
        const double t = time_median(
            [&](int r) {
              auto* w = static_cast<char*>(ws[static_cast<std::size_t>(r)]);
              gpu::quantize_rows_int8(a, gpu::Elem::bf16, m, k, qa, row_scales, nullptr);
              gemm.int8_gemm(qa, reinterpret_cast<const int8_t*>(w), acc, m, n, k, nullptr);
              gpu::scale_int8_product(acc, row_scales, w + q.scale_offset(), m, n, c, gpu::Elem::bf16, false, nullptr);
            },
            static_cast<int>(ws.size()), iters, e0, e1);
        rows.push_back({sh.name, "w8a8 int8 cuBLASLt", m, k, n, static_cast<double>(q.bytes()), t});
        for (void* p : ws) PERFSIM_CUDA_CHECK(cudaFree(p));
        PERFSIM_CUDA_CHECK(cudaFree(qa));
        PERFSIM_CUDA_CHECK(cudaFree(row_scales));
        PERFSIM_CUDA_CHECK(cudaFree(acc));
      }
      PERFSIM_CUDA_CHECK(cudaFree(a));
      PERFSIM_CUDA_CHECK(cudaFree(c));
    }
  }
  std::printf("\n| layer | m | k × n | path | weight MB | µs | GB/s | roofline share |\n|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %lld | %lld × %lld | %s | %.1f | %.1f | %.0f | %.2f |\n", r.layer.c_str(),
                static_cast<long long>(r.m), static_cast<long long>(r.k), static_cast<long long>(r.n), r.path.c_str(),
                r.bytes / 1e6, r.seconds * 1e6, r.bytes / r.seconds / 1e9, r.bytes / r.seconds / copy_bw);
  return 0;
}
