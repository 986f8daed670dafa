// GEMM benchmark: perfsim's GEMM path (GemmEngine::gemm with autotuning: the plan keeps the
// fastest of cuBLASLt's top-8 heuristic algorithms, timed on its first call) against the best
// of cuBLASLt's top-N heuristic algorithms timed in the same run on the same descriptor, and,
// for information, the untuned path (autotune off: the first heuristic algorithm), for bf16, fp16, fp8 (e4m3 TN, per-tensor scales,
// bf16 out) and tf32, on a large square (8192³), an LLM MLP shape (m 4096, n 14336, k 4096)
// and a decode-skinny one (m 8). Layouts are the graph's: A [m, k], B [k, n] row-major; fp8
// takes B stored [n, k], as the backend stores fp8 weights. CUDA events around each launch,
// warm-up, medians; the input sets rotate so that large GEMMs do not run from L2.
//   bench_gemm [iters=30] [top_n=16]
// A report: exits 0 unless a CUDA/cuBLAS call fails. The markdown table is printed last.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "bench/cuda/gemm_bench_util.hpp"

namespace {

namespace gpu = perfsim::cuda;
using gpu::Elem;
using perfsim::bench::alloc_filled;
using perfsim::bench::time_median;

struct Case {
  const char* dtype;
  Elem in, out;
  bool tf32;
  int64_t m, n, k;
};

cudaDataType_t cuda_type(Elem e) {
  switch (e) {
    case Elem::f32: return CUDA_R_32F;
    case Elem::bf16: return CUDA_R_16BF;
    case Elem::f16: return CUDA_R_16F;
    default: return CUDA_R_8F_E4M3;
  }
}

struct Row {
  Case c;
  double perfsim_s = 0, untuned_s = 0, best_s = 0, first_s = 0;
  int best_index = -1, algos = 0;
};

Row run_case(const Case& c, gpu::GemmEngine& engine, gpu::GemmEngine& untuned, cublasLtHandle_t lt, void* ws, int iters, int top_n,
             cudaEvent_t e0, cudaEvent_t e1) {
  const bool fp8 = c.in == Elem::e4m3;
  const int eb = gpu::bytes_of(c.in);
  const std::size_t a_bytes = static_cast<std::size_t>(c.m * c.k) * eb, b_bytes = static_cast<std::size_t>(c.k * c.n) * eb;
  const std::size_t c_bytes = static_cast<std::size_t>(c.m * c.n) * gpu::bytes_of(c.out);
  // Enough input sets that consecutive launches do not find their operands in L2 (50 MiB).
  const int sets = static_cast<int>(std::clamp<std::size_t>((256u << 20) / (a_bytes + b_bytes) + 1, 2, 8));
  std::vector<void*> as, bs;
  for (int s = 0; s < sets; ++s) {
    as.push_back(alloc_filled(a_bytes, eb, 17u + static_cast<uint32_t>(s)));
    bs.push_back(alloc_filled(b_bytes, eb, 91u + static_cast<uint32_t>(s)));
  }
  void* out = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&out, c_bytes));
  float* scales = nullptr;  // [2] dequantization scales (1: the fill is already in range)
  PERFSIM_CUDA_CHECK(cudaMalloc(&scales, 256 * sizeof(float)));
  const float ones[2] = {1.0f, 1.0f};
  PERFSIM_CUDA_CHECK(cudaMemcpy(scales, ones, sizeof(ones), cudaMemcpyHostToDevice));
  float* scale_b = scales + 64;  // its own 256-byte line
  PERFSIM_CUDA_CHECK(cudaMemcpy(scale_b, ones, sizeof(float), cudaMemcpyHostToDevice));

  perfsim::ops::GemmShape s;
  s.m = c.m, s.n = c.n, s.k = c.k, s.trans_b = fp8;
  Row row{c};
  // The first warm-up launch of the tuned engine creates and tunes the plan.
  auto engine_time = [&](gpu::GemmEngine& eng) {
    return time_median(
        [&](int r) {
          eng.gemm({as[static_cast<std::size_t>(r)], c.in, fp8 ? scales : nullptr},
                   {bs[static_cast<std::size_t>(r)], c.in, fp8 ? scale_b : nullptr}, out, c.out, s, c.tf32, nullptr);
        },
        sets, iters, e0, e1);
  };
  row.perfsim_s = engine_time(engine);
  row.untuned_s = engine_time(untuned);

  // The same problem described to cuBLASLt directly (column-major C^T = B^T · A^T).
  cublasLtMatmulDesc_t desc = nullptr;
  const cublasComputeType_t compute = c.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  PERFSIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  const cublasOperation_t ta = fp8 ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  PERFSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  PERFSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (fp8) {
    const int8_t fast = 0;  // as GemmEngine: fp32 promotion of the accumulator
    PERFSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    PERFSIM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_b, sizeof(scale_b)));
    PERFSIM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scales, sizeof(scales)));
  }
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  if (fp8) PERFSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, cuda_type(c.in), c.k, c.n, c.k));  // B [n, k]
  else PERFSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, cuda_type(c.in), c.n, c.k, c.n));      // B [k, n]
  PERFSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, cuda_type(c.in), c.k, c.m, c.k));          // A [m, k]
  PERFSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, cuda_type(c.out), c.n, c.m, c.n));         // C [m, n]
  cublasLtMatmulPreference_t pref = nullptr;
  PERFSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws_bytes = gpu::GemmEngine::workspace_bytes;
  PERFSIM_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<std::size_t>(top_n));
  int found = 0;
  PERFSIM_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, top_n, res.data(), &found));
  row.algos = found;
  const float alpha = 1.0f, beta = 0.0f;
  for (int i = 0; i < found; ++i) {
    const cublasLtMatmulAlgo_t* algo = &res[static_cast<std::size_t>(i)].algo;
    bool ok = true;
    const double t = time_median(
        [&](int r) {
          const cublasStatus_t st = cublasLtMatmul(lt, desc, &alpha, bs[static_cast<std::size_t>(r)], la,
                                                   as[static_cast<std::size_t>(r)], lb, &beta, out, lc, out, lc, algo,
                                                   ws, ws_bytes, nullptr);
          ok = ok && st == CUBLAS_STATUS_SUCCESS;
        },
        sets, iters, e0, e1);
    if (!ok) continue;
    if (i == 0) row.first_s = t;
    if (row.best_index < 0 || t < row.best_s) row.best_s = t, row.best_index = i;
  }
  (void)cublasLtMatmulPreferenceDestroy(pref);
  (void)cublasLtMatrixLayoutDestroy(la);
  (void)cublasLtMatrixLayoutDestroy(lb);
  (void)cublasLtMatrixLayoutDestroy(lc);
  (void)cublasLtMatmulDescDestroy(desc);
  for (void* p : as) PERFSIM_CUDA_CHECK(cudaFree(p));
  for (void* p : bs) PERFSIM_CUDA_CHECK(cudaFree(p));
  PERFSIM_CUDA_CHECK(cudaFree(out));
  PERFSIM_CUDA_CHECK(cudaFree(scales));
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 30;
  const int top_n = argc > 2 ? std::atoi(argv[2]) : 16;
  struct Dt {
    const char* name;
    Elem in, out;
    bool tf32;
  };
  const Dt dts[] = {{"bf16", Elem::bf16, Elem::bf16, false},
                    {"fp16", Elem::f16, Elem::f16, false},
                    {"fp8", Elem::e4m3, Elem::bf16, false},
                    {"tf32", Elem::f32, Elem::f32, true}};
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{8192, 8192, 8192}, {4096, 14336, 4096}, {8, 14336, 4096}};

  gpu::GemmEngine engine;  // autotuned (the default)
  gpu::GemmEngine untuned;
  untuned.set_autotune(false);
  cublasLtHandle_t lt = nullptr;
  PERFSIM_CUBLAS_CHECK(cublasLtCreate(&lt));
  void* ws = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&ws, gpu::GemmEngine::workspace_bytes));
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e0));
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<Row> rows;
  for (const Shape& sh : shapes)
    for (const Dt& d : dts) {
      const Row r = run_case({d.name, d.in, d.out, d.tf32, sh.m, sh.n, sh.k}, engine, untuned, lt, ws, iters, top_n, e0, e1);
      std::printf("RESULT gemm %s m=%lld n=%lld k=%lld perfsim_us=%.2f untuned_us=%.2f best_us=%.2f best_algo=%d of %d\n",
                  r.c.dtype, static_cast<long long>(r.c.m), static_cast<long long>(r.c.n),
                  static_cast<long long>(r.c.k), r.perfsim_s * 1e6, r.untuned_s * 1e6, r.best_s * 1e6, r.best_index,
                  r.algos);
      std::fflush(stdout);
      rows.push_back(r);
    }
  std::printf(
      "\n| dtype | m | n | k | perfsim (tuned) µs | TFLOP/s | best of top-%d µs (algo #) | tuned / best | untuned µs | "
      "untuned / best |\n",
      top_n);
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    const double flops = 2.0 * static_cast<double>(r.c.m) * static_cast<double>(r.c.n) * static_cast<double>(r.c.k);
    std::printf("| %s | %lld | %lld | %lld | %.1f | %.0f | %.1f (#%d of %d) | %.3f | %.1f | %.3f |\n", r.c.dtype,
                static_cast<long long>(r.c.m), static_cast<long long>(r.c.n), static_cast<long long>(r.c.k),
                r.perfsim_s * 1e6, flops / r.perfsim_s * 1e-12, r.best_s * 1e6, r.best_index, r.algos,
                r.perfsim_s / r.best_s, r.untuned_s * 1e6, r.untuned_s / r.best_s);
  }
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  (void)cudaFree(ws);
  (void)cublasLtDestroy(lt);
  return 0;
}
