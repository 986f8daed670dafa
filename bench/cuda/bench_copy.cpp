// Host <-> device copy benchmark: cudaMemcpyAsync bandwidth for uploads and downloads from
// pinned (cudaHostAlloc) and pageable (aligned operator new, pages touched first) host
// memory, 64 KiB to 1 GiB; per case 2 warm-up copies, then the median over repeats of the
// time between CUDA events around the copy on a non-blocking stream (GB = 1e9 B). For
// pageable copies the host wall time (call to synchronized) is shown too: the driver stages
// them through its own pinned buffer, on the host.
// Then the overlap check: a pinned 256 MiB copy on a side stream concurrent with bf16 8192³
// GEMMs (perfsim's GemmEngine) on stream 0, as many as take about as long as the copy; the
// time of both against each alone: ratio = both / max(copy, gemms) (1.0 = full overlap,
// (copy + gemms) / max = none).
//   bench_copy [repeats=15]
// A report: exits 0 unless a CUDA call fails. The markdown tables are printed last.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_gemm.hpp"

namespace {

namespace gpu = perfsim::cuda;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Timing {
  double event_s = 0;  // median seconds between the events around the copy
  double wall_s = 0;   // median host seconds from the call until the stream is synchronized
};

// Median times of `launch` (enqueues work on s) over `repeats`, after 2 warm-up launches.
template <class F>
Timing time_median(F&& launch, cudaStream_t s, int repeats) {
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e0));
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 2; ++i) launch();
  PERFSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> ev, wall;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    PERFSIM_CUDA_CHECK(cudaEventRecord(e0, s));
    launch();
    PERFSIM_CUDA_CHECK(cudaEventRecord(e1, s));
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(e1));
    const auto t1 = std::chrono::steady_clock::now();
    float ms = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    ev.push_back(ms * 1e-3);
    wall.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  return {median(ev), median(wall)};
}

std::string size_name(std::size_t b) {
  if (b >= (1u << 30)) return std::to_string(b >> 30) + " GiB";
  if (b >= (1u << 20)) return std::to_string(b >> 20) + " MiB";
  return std::to_string(b >> 10) + " KiB";
}

constexpr std::size_t page = 4096;

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(3, std::atoi(argv[1])) : 15;
  int n_dev = 0;
  if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
    std::printf("bench_copy: no CUDA device\n");
    return 0;
  }
  PERFSIM_CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  PERFSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("bench_copy on %s, %d repeats (fewer above 64 MiB), medians\n", prop.name, repeats);

  constexpr std::size_t max_bytes = std::size_t{1} << 30;
  void* dev = nullptr;
  void* pinned = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&dev, max_bytes));
  PERFSIM_CUDA_CHECK(cudaHostAlloc(&pinned, max_bytes, cudaHostAllocDefault));
  void* pageable = ::operator new(max_bytes, std::align_val_t{page});
  std::memset(pageable, 1, max_bytes);  // fault the pages in: first-touch is not copy time
  std::memset(pinned, 1, max_bytes);
  PERFSIM_CUDA_CHECK(cudaMemset(dev, 0, max_bytes));
  cudaStream_t s0 = nullptr, s1 = nullptr;
  PERFSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  PERFSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));

  struct Row {
    std::size_t bytes;
    double gbs[4];      // upload pinned, upload pageable, download pinned, download pageable (events)
    double wall_gbs[4]; // the same from host wall time
  };
  std::vector<Row> rows;
  for (std::size_t bytes = 64u << 10; bytes <= max_bytes; bytes *= 4) {
    Row r{bytes, {}, {}};
    const int reps = bytes > (64u << 20) ? std::max(3, repeats / 3) : repeats;
    int col = 0;
    for (bool upload : {true, false}) {
      for (void* host : {pinned, pageable}) {
        const Timing t = time_median(
            [&] {
              if (upload) PERFSIM_CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s0));
              else PERFSIM_CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s0));
            },
            s0, reps);
        r.gbs[col] = static_cast<double>(bytes) / t.event_s * 1e-9;
        r.wall_gbs[col] = static_cast<double>(bytes) / t.wall_s * 1e-9;
        ++col;
      }
    }
    std::printf("%8s  up pinned %6.2f  up pageable %6.2f (wall %6.2f)  down pinned %6.2f  down pageable %6.2f (wall %6.2f) GB/s\n",
                size_name(bytes).c_str(), r.gbs[0], r.gbs[1], r.wall_gbs[1], r.gbs[2], r.gbs[3], r.wall_gbs[3]);
    std::fflush(stdout);
    rows.push_back(r);
  }

  // Overlap: a pinned copy on s1 beside GEMMs on s0.
  constexpr std::size_t copy_bytes = 256u << 20;
  constexpr int64_t n = 8192;
  const std::size_t mat = static_cast<std::size_t>(n * n) * 2;  // bf16
  void *a = nullptr, *b = nullptr, *c = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&a, mat));
  PERFSIM_CUDA_CHECK(cudaMalloc(&b, mat));
  PERFSIM_CUDA_CHECK(cudaMalloc(&c, mat));
  PERFSIM_CUDA_CHECK(cudaMemset(a, 0x3c, mat));  // bf16 0x3c3c: about 0.0115, finite
  PERFSIM_CUDA_CHECK(cudaMemset(b, 0x3c, mat));
  gpu::GemmEngine gemm;
  perfsim::ops::GemmShape shape;
  shape.m = shape.n = shape.k = n;
  const gpu::GemmOperand ga{a, gpu::Elem::bf16, nullptr}, gb{b, gpu::Elem::bf16, nullptr};
  auto one_gemm = [&] { gemm.gemm(ga, gb, c, gpu::Elem::bf16, shape, false, s0); };
  one_gemm();  // tunes the plan
  PERFSIM_CUDA_CHECK(cudaStreamSynchronize(s0));
  const double t_one_gemm = time_median(one_gemm, s0, repeats).event_s;

  struct Overlap {
    const char* what;
    double copy, gemms, both;
    int n_gemms;
  };
  std::vector<Overlap> overlaps;
  cudaEvent_t fork = nullptr, joined = nullptr;
  PERFSIM_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  PERFSIM_CUDA_CHECK(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
  for (bool upload : {true, false}) {
    auto copy = [&](cudaStream_t s) {
      if (upload) PERFSIM_CUDA_CHECK(cudaMemcpyAsync(dev, pinned, copy_bytes, cudaMemcpyHostToDevice, s));
      else PERFSIM_CUDA_CHECK(cudaMemcpyAsync(pinned, dev, copy_bytes, cudaMemcpyDeviceToHost, s));
    };
    const double t_copy = time_median([&] { copy(s0); }, s0, repeats).event_s;
    const int k = std::max(1, static_cast<int>(t_copy / t_one_gemm + 0.5));
    auto gemms = [&] {
      for (int i = 0; i < k; ++i) one_gemm();
    };
    const double t_gemms = time_median(gemms, s0, repeats).event_s;
    const double t_both = time_median(
                              [&] {
                                PERFSIM_CUDA_CHECK(cudaEventRecord(fork, s0));
                                PERFSIM_CUDA_CHECK(cudaStreamWaitEvent(s1, fork, 0));
                                copy(s1);
                                PERFSIM_CUDA_CHECK(cudaEventRecord(joined, s1));
                                gemms();
                                PERFSIM_CUDA_CHECK(cudaStreamWaitEvent(s0, joined, 0));
                              },
                              s0, repeats)
                              .event_s;
    overlaps.push_back({upload ? "pinned upload 256 MiB" : "pinned download 256 MiB", t_copy, t_gemms, t_both, k});
  }

  std::printf("\n| size | upload pinned | upload pageable | download pinned | download pageable |\n|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f |\n", size_name(r.bytes).c_str(), r.gbs[0], r.gbs[1], r.gbs[2],
                r.gbs[3]);
  std::printf("\nGB/s (1e9 B/s), CUDA events around one cudaMemcpyAsync, median.\n");
  std::printf("\n| copy (side stream) | copy alone ms | bf16 8192^3 GEMMs alone ms | both ms | both / max | serial / max |\n"
              "|---|---|---|---|---|---|\n");
  for (const Overlap& o : overlaps) {
    const double mx = std::max(o.copy, o.gemms);
    std::printf("| %s | %.3f | %.3f (%d) | %.3f | %.3f | %.3f |\n", o.what, o.copy * 1e3, o.gemms * 1e3, o.n_gemms,
                o.both * 1e3, o.both / mx, (o.copy + o.gemms) / mx);
  }

  (void)cudaEventDestroy(fork);
  (void)cudaEventDestroy(joined);
  (void)cudaFree(a), (void)cudaFree(b), (void)cudaFree(c);
  (void)cudaStreamDestroy(s0), (void)cudaStreamDestroy(s1);
  ::operator delete(pageable, std::align_val_t{page});
  (void)cudaFreeHost(pinned);
  (void)cudaFree(dev);
  return 0;
}
