// NCCL calls for the five collectives, buffer sizing, and the timed run (CUDA events per rank,
// median over repeats of the slowest rank).
#include "backends/cuda/nccl_collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cuda/bus_bandwidth.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

BufferElements buffer_elements(Collective c, int ranks, std::size_t count) {
  const auto n = static_cast<std::size_t>(std::max(ranks, 1));
  switch (c) {
    case Collective::all_reduce: return {count, count};
    case Collective::all_gather: return {count, n * count};
    case Collective::reduce_scatter: return {n * count, count};
    case Collective::all_to_all: return {n * count, n * count};
    case Collective::send_recv: return {count, count};
  }
  return {count, count};
}

std::size_t collective_bytes(Collective c, int ranks, std::size_t count, DType t) {
  const BufferElements e = buffer_elements(c, ranks, count);
  return std::max(e.send, e.recv) * static_cast<std::size_t>(bytes_of(t));
}

std::size_t block_count_for(Collective c, int ranks, std::size_t bytes, DType t) {
  const std::size_t per_block = collective_bytes(c, ranks, 1, t);
  return std::max<std::size_t>(1, bytes / per_block);
}

namespace {

#ifdef PERFSIM_HAVE_NCCL
ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::fp32:
    case DType::tf32: return ncclFloat32;  // tf32 is a compute mode: stored as fp32
    case DType::bf16: return ncclBfloat16;
    case DType::fp16: return ncclFloat16;
    case DType::int8: return ncclInt8;
    case DType::int32: return ncclInt32;
    case DType::fp8:
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
      return ncclFloat8e4m3;
#else
      break;
#endif
    case DType::int4: break;
  }
  throw NotExecutable(fmt::format("NCCL {} cannot carry {} tensors", nccl_version(), name_of(t)));
}
#endif

// One rank's device allocation, freed on scope exit (the rank's device is current).
struct RankBuffer {
  void* ptr = nullptr;
  explicit RankBuffer(std::size_t bytes) {
    PERFSIM_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(bytes, 1)));
  }
  RankBuffer(const RankBuffer&) = delete;
  RankBuffer& operator=(const RankBuffer&) = delete;
  ~RankBuffer() { (void)cudaFree(ptr); }
};

// Start/stop event pairs of one rank, destroyed on scope exit.
struct EventPairs {
  std::vector<cudaEvent_t> start, stop;
  explicit EventPairs(int n) : start(static_cast<std::size_t>(n)), stop(static_cast<std::size_t>(n)) {
    for (int i = 0; i < n; ++i) {
      PERFSIM_CUDA_CHECK(cudaEventCreate(&start[static_cast<std::size_t>(i)]));
      PERFSIM_CUDA_CHECK(cudaEventCreate(&stop[static_cast<std::size_t>(i)]));
    }
  }
  EventPairs(const EventPairs&) = delete;
  EventPairs& operator=(const EventPairs&) = delete;
  ~EventPairs() {
    for (cudaEvent_t e : start) (void)cudaEventDestroy(e);
    for (cudaEvent_t e : stop) (void)cudaEventDestroy(e);
  }
  [[nodiscard]] double seconds(int i) const {
    float ms = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start[static_cast<std::size_t>(i)],
                                            stop[static_cast<std::size_t>(i)]));
    return ms * 1e-3;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

void enqueue_collective(const RankContext& ctx, Collective c, DType t, const void* send,
                        void* recv, std::size_t count) {
#ifndef PERFSIM_HAVE_NCCL
  (void)ctx, (void)c, (void)t, (void)send, (void)recv, (void)count;
  throw NotExecutable("collectives need NCCL, and perfsim was built without it");
#else
  const ncclDataType_t type = nccl_type(t);
  const auto esize = static_cast<std::size_t>(bytes_of(t));
  const auto* src = static_cast<const char*>(send);
  auto* dst = static_cast<char*>(recv);
  const int n = ctx.ranks;
  switch (c) {
    case Collective::all_reduce:
      PERFSIM_NCCL_CHECK(ncclAllReduce(send, recv, count, type, ncclSum, ctx.comm, ctx.stream));
      return;
    case Collective::all_gather:
      PERFSIM_NCCL_CHECK(ncclAllGather(send, recv, count, type, ctx.comm, ctx.stream));
      return;
    case Collective::reduce_scatter:
      PERFSIM_NCCL_CHECK(ncclReduceScatter(send, recv, count, type, ncclSum, ctx.comm, ctx.stream));
      return;
    case Collective::all_to_all:
      // Grouped point-to-point, one send and one receive per peer (NCCL user guide,
      // "Point-to-point communication: All-to-all"); works on every NCCL 2.7+.
      PERFSIM_NCCL_CHECK(ncclGroupStart());
      for (int peer = 0; peer < n; ++peer) {
        const std::size_t off = static_cast<std::size_t>(peer) * count * esize;
        PERFSIM_NCCL_CHECK(ncclSend(src + off, count, type, peer, ctx.comm, ctx.stream));
        PERFSIM_NCCL_CHECK(ncclRecv(dst + off, count, type, peer, ctx.comm, ctx.stream));
      }
      PERFSIM_NCCL_CHECK(ncclGroupEnd());
      return;
    case Collective::send_recv: {
      const int next = (ctx.rank + 1) % n, prev = (ctx.rank + n - 1) % n;
      PERFSIM_NCCL_CHECK(ncclGroupStart());
      PERFSIM_NCCL_CHECK(ncclSend(send, count, type, next, ctx.comm, ctx.stream));
      PERFSIM_NCCL_CHECK(ncclRecv(recv, count, type, prev, ctx.comm, ctx.stream));
      PERFSIM_NCCL_CHECK(ncclGroupEnd());
      return;
    }
  }
#endif
}

CollectiveResult time_collective(const NcclComm& comm, const CollectiveSpec& spec) {
  if (spec.repeats < 1 || spec.warmup < 0)
    throw ConfigError(fmt::format("collective timing needs repeats >= 1 and warmup >= 0 (got {}, {})",
                                  spec.repeats, spec.warmup));
#ifdef PERFSIM_HAVE_NCCL
  (void)nccl_type(spec.dtype);  // refuse an unsupported dtype here, before any rank starts
#endif
  CollectiveResult res;
  res.op = spec.op;
  res.dtype = spec.dtype;
  res.ranks = comm.size();
  res.count = block_count_for(spec.op, res.ranks, spec.bytes, spec.dtype);
  res.bytes = collective_bytes(spec.op, res.ranks, res.count, spec.dtype);
  const BufferElements elems = buffer_elements(spec.op, res.ranks, res.count);
  const auto esize = static_cast<std::size_t>(bytes_of(spec.dtype));

  const auto n = static_cast<std::size_t>(res.ranks);
  std::vector<double> probe(n, 0.0);                      // one timed collective per rank
  std::vector<std::vector<double>> per_rank(n);           // [rank][repeat] seconds per collective
  std::vector<int> batch_seen(n, 1);
  comm.for_each_rank([&](const RankContext& ctx) {
    const auto r = static_cast<std::size_t>(ctx.rank);
    RankBuffer send(elems.send * esize);
    RankBuffer recv(elems.recv * esize);
    PERFSIM_CUDA_CHECK(cudaMemsetAsync(send.ptr, 0, elems.send * esize, ctx.stream));
    auto once = [&] { enqueue_collective(ctx, spec.op, spec.dtype, send.ptr, recv.ptr, res.count); };
    for (int i = 0; i < spec.warmup; ++i) once();
    PERFSIM_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));

    EventPairs ev(spec.repeats + 1);  // pair 0: the probe that sizes the batch
    ctx.sync_ranks();
    PERFSIM_CUDA_CHECK(cudaEventRecord(ev.start[0], ctx.stream));
    once();
    PERFSIM_CUDA_CHECK(cudaEventRecord(ev.stop[0], ctx.stream));
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(ev.stop[0]));
    probe[r] = ev.seconds(0);
    ctx.sync_ranks();
    // Every rank computes the same batch from the same probes (a mismatch would deadlock).
    const double slowest = *std::max_element(probe.begin(), probe.end());
    const int batch = slowest <= 0 ? 1
        : static_cast<int>(std::clamp(std::ceil(spec.target_repeat_seconds / slowest), 1.0, 1000.0));
    batch_seen[r] = batch;

    for (int rep = 1; rep <= spec.repeats; ++rep) {
      ctx.sync_ranks();
      PERFSIM_CUDA_CHECK(cudaEventRecord(ev.start[static_cast<std::size_t>(rep)], ctx.stream));
      for (int b = 0; b < batch; ++b) once();
      PERFSIM_CUDA_CHECK(cudaEventRecord(ev.stop[static_cast<std::size_t>(rep)], ctx.stream));
      PERFSIM_CUDA_CHECK(cudaEventSynchronize(ev.stop[static_cast<std::size_t>(rep)]));
    }
    per_rank[r].resize(static_cast<std::size_t>(spec.repeats));
    for (int rep = 1; rep <= spec.repeats; ++rep)
      per_rank[r][static_cast<std::size_t>(rep - 1)] = ev.seconds(rep) / batch;
  });

  // A repeat ends when its slowest rank ends: that rank's time is the collective's.
  std::vector<double> slowest(static_cast<std::size_t>(spec.repeats), 0.0);
  for (const auto& times : per_rank)
    for (std::size_t i = 0; i < times.size(); ++i) slowest[i] = std::max(slowest[i], times[i]);
  res.batch = batch_seen[0];
  res.time = median(slowest);
  res.min_time = *std::min_element(slowest.begin(), slowest.end());
  res.algbw = algorithm_bandwidth(static_cast<double>(res.bytes), res.time);
  res.busbw = bus_bandwidth(spec.op, res.ranks, static_cast<double>(res.bytes), res.time);
  return res;
}

}  // namespace perfsim::cuda
