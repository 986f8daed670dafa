// GEMM layouts: the same problem C[m, n] = op(A)[m, k] · op(B)[k, n] timed in the three
// layouts a training step runs it in: forward (A [m, k], B [k, n]), dgrad (B stored [n, k]:
// dX = dY · Wᵀ) and wgrad (A stored [k, m]: dW = Xᵀ · dY). cuBLASLt picks other kernels for
// each, so one shape can run at different speeds. perfsim's GEMM path (GemmEngine, autotuned),
// CUDA events around each launch, warm-up, medians; the input sets rotate so that operands do
// not stay in L2.
//   bench_gemm_layouts [iters=20] [m,n,k ...]   (default: a set of model shapes)
// A report: exits 0 unless a CUDA/cuBLAS call fails; the markdown table is printed last.
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

struct Shape {
  int64_t m, n, k;
};

struct Layout {
  const char* name;
  bool trans_a, trans_b;
};
constexpr Layout layouts[] = {{"fwd", false, false}, {"dgrad", false, true}, {"wgrad", true, false}};

// Median seconds of one GEMM in each layout, the input sets shared by the three.
std::vector<double> time_layouts(gpu::GemmEngine& engine, Elem t, const Shape& sh, int iters, cudaEvent_t e0,
                                 cudaEvent_t e1) {
  const int eb = gpu::bytes_of(t);
  const auto a_bytes = static_cast<std::size_t>(sh.m * sh.k) * eb, b_bytes = static_cast<std::size_t>(sh.k * sh.n) * eb;
  const int sets = static_cast<int>(std::clamp<std::size_t>((256u << 20) / (a_bytes + b_bytes) + 1, 2, 8));
  std::vector<void*> as, bs;
  for (int s = 0; s < sets; ++s) {
    as.push_back(alloc_filled(a_bytes, eb, 17u + static_cast<uint32_t>(s)));
    bs.push_back(alloc_filled(b_bytes, eb, 91u + static_cast<uint32_t>(s)));
  }
  void* out = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&out, static_cast<std::size_t>(sh.m * sh.n) * eb));
  std::vector<double> result;
  for (const Layout& l : layouts) {
    perfsim::ops::GemmShape s;
    s.m = sh.m, s.n = sh.n, s.k = sh.k, s.trans_a = l.trans_a, s.trans_b = l.trans_b;
    auto launch = [&](int r) {
      engine.gemm({as[static_cast<std::size_t>(r)], t, nullptr}, {bs[static_cast<std::size_t>(r)], t, nullptr}, out, t,
                  s, false, nullptr);
    };
    result.push_back(time_median(launch, sets, iters, e0, e1));  // its warm-up tunes the plan
  }
  for (void* p : as) PERFSIM_CUDA_CHECK(cudaFree(p));
  for (void* p : bs) PERFSIM_CUDA_CHECK(cudaFree(p));
  PERFSIM_CUDA_CHECK(cudaFree(out));
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  std::vector<Shape> shapes;
  for (int i = 2; i < argc; ++i) {
    Shape s{};
    if (std::sscanf(argv[i], "%ld,%ld,%ld", &s.m, &s.n, &s.k) != 3 || s.m <= 0 || s.n <= 0 || s.k <= 0) {
      std::fprintf(stderr, "bench_gemm_layouts: '%s' is not m,n,k (three positive integers)\n", argv[i]);
      return 2;
    }
    shapes.push_back(s);
  }
  if (shapes.empty())  // m = in features, n = out features, k = tokens (a wgrad's view)
    shapes = {{1024, 1024, 4096}, {1024, 4096, 4096}, {4096, 1024, 4096}, {2304, 2304, 3000}, {2304, 768, 3000},
              {2304, 6144, 3000}, {6144, 2304, 3000}, {1280, 1280, 3840}, {2560, 2560, 4096}, {4096, 4096, 4096}};
  struct Dt {
    const char* name;
    Elem t;
  };
  const Dt dts[] = {{"bf16", Elem::bf16}, {"fp32", Elem::f32}};
  gpu::GemmEngine engine;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e0));
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e1));
  cudaDeviceProp prop{};
  PERFSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("GEMM layouts on %s, median of %d launches, autotuned plans\n\n", prop.name, iters);
  std::printf("| dtype | m × n × k | fwd µs | dgrad µs | wgrad µs | dgrad / fwd | wgrad / fwd |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  for (const Dt& d : dts)
    for (const Shape& s : shapes) {
      const std::vector<double> t = time_layouts(engine, d.t, s, iters, e0, e1);
      std::printf("| %s | %ld × %ld × %ld | %.1f | %.1f | %.1f | %.3f | %.3f |\n", d.name, s.m, s.n, s.k, t[0] * 1e6,
                  t[1] * 1e6, t[2] * 1e6, t[1] / t[0], t[2] / t[0]);
      std::fflush(stdout);
    }
  PERFSIM_CUDA_CHECK(cudaEventDestroy(e0));
  PERFSIM_CUDA_CHECK(cudaEventDestroy(e1));
  return 0;
}
