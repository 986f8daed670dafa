// NCCL collectives over the visible GPUs (one thread per GPU), sizes doubling from --min to
// --max bytes as nccl-tests sweeps them, printed as one table: size, op, time, algorithm and
// bus bandwidth (nccl-tests definitions, backends/cuda/bus_bandwidth.hpp; GB = 1e9 bytes).
//   bench_nccl [--ops all_reduce,all_gather,reduce_scatter,all_to_all,send_recv]
//              [--min 8] [--max 1073741824] [--dtype fp32] [--gpus N] [--warmup 5] [--repeats 20]
// A report, not a check: with fewer than 2 GPUs or no NCCL it says so and exits 0.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/nccl_collectives.hpp"
#include "backends/cuda/nccl_comm.hpp"

namespace {

using namespace perfsim;

struct Options {
  std::vector<Collective> ops = {Collective::all_reduce, Collective::all_gather,
                                 Collective::reduce_scatter, Collective::all_to_all,
                                 Collective::send_recv};
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{1} << 30;
  DType dtype = DType::fp32;
  int gpus = 0;  // 0: all visible
  int warmup = 5;
  int repeats = 20;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "bench_nccl: %s\n", why);
  std::fprintf(stderr, "usage: bench_nccl [--ops a,b,..] [--min BYTES] [--max BYTES] [--dtype T] "
                       "[--gpus N] [--warmup N] [--repeats N]\n");
  std::exit(2);
}

Collective parse_op(std::string_view s) {
  for (Collective c : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                       Collective::all_to_all, Collective::send_recv})
    if (name_of(c) == s) return c;
  usage(("unknown collective '" + std::string(s) + "'").c_str());
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + std::string(a)).c_str());
    const std::string v = argv[++i];
    if (a == "--ops") {
      o.ops.clear();
      for (std::size_t p = 0; p <= v.size();) {
        const std::size_t q = std::min(v.find(',', p), v.size());
        o.ops.push_back(parse_op(std::string_view(v).substr(p, q - p)));
        p = q + 1;
      }
    } else if (a == "--min") o.min_bytes = std::stoull(v);
    else if (a == "--max") o.max_bytes = std::stoull(v);
    else if (a == "--gpus") o.gpus = std::stoi(v);
    else if (a == "--warmup") o.warmup = std::stoi(v);
    else if (a == "--repeats") o.repeats = std::stoi(v);
    else if (a == "--dtype") {
      const auto t = parse_dtype(v);
      if (!t) usage(("unknown dtype '" + v + "'").c_str());
      o.dtype = *t;
    } else usage(("unknown option " + std::string(a)).c_str());
  }
  if (o.min_bytes == 0 || o.max_bytes < o.min_bytes) usage("need 0 < --min <= --max");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  if (!cuda::nccl_available()) {
    std::puts("bench_nccl: perfsim was built without NCCL: nothing to measure");
    return 0;
  }
  const int visible = cuda::device_count();
  if (visible < 2 || (opt.gpus != 0 && opt.gpus < 2)) {
    std::printf("bench_nccl: %d GPU(s) visible, collectives need 2 or more: nothing to measure\n", visible);
    return 0;
  }
  // Ring/tree algorithms only (what the cost model prices) unless the caller chose otherwise.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  try {
    cuda::NcclComm comm = cuda::NcclComm::over_visible(opt.gpus);
    std::printf("# NCCL %s, %d ranks:", cuda::nccl_version().c_str(), comm.size());
    for (int r = 0; r < comm.size(); ++r)
      std::printf(" [%d] %s", r, cuda::query_device(comm.device(r)).name.c_str());
    std::printf("\n# dtype %s, warmup %d, median of %d repeats, NCCL_NVLS_ENABLE=%s\n",
                std::string(name_of(opt.dtype)).c_str(), opt.warmup, opt.repeats,
                std::getenv("NCCL_NVLS_ENABLE"));
    std::printf("%14s  %-14s  %12s  %6s  %12s  %10s  %10s\n", "size_B", "op", "count", "batch",
                "time_us", "algbw_GBs", "busbw_GBs");
    for (Collective c : opt.ops)
      for (std::size_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= 2) {
        cuda::CollectiveSpec spec;
        spec.op = c;
        spec.dtype = opt.dtype;
        spec.bytes = bytes;
        spec.warmup = opt.warmup;
        spec.repeats = opt.repeats;
        const cuda::CollectiveResult r = cuda::time_collective(comm, spec);
        std::printf("%14zu  %-14s  %12zu  %6d  %12.2f  %10.2f  %10.2f\n", r.bytes,
                    std::string(name_of(c)).c_str(), r.count, r.batch, r.time * 1e6, r.algbw / 1e9,
                    r.busbw / 1e9);
        std::fflush(stdout);
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_nccl: %s\n", e.what());
    return 1;
  }
  return 0;
}
