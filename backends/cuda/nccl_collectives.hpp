// One NCCL collective on every rank of an NcclComm: buffer sizes, the enqueue call, and a timed
// run reported as algorithm and bus bandwidth (nccl-tests definitions, bus_bandwidth.hpp).
//
// Buffers of one rank, with `count` elements per block and n ranks (block i = elements
// [i·count, (i+1)·count)):
//   all_reduce      send [count]    -> recv [count]      sum over ranks, element-wise
//   all_gather      send [count]    -> recv [n·count]    block i of recv = rank i's send
//   reduce_scatter  send [n·count]  -> recv [count]      recv = sum over ranks of their block r
//   all_to_all      send [n·count]  -> recv [n·count]    block j of send goes to rank j, block i
//                                                        of recv came from rank i
//   send_recv       send [count]    -> recv [count]      ring: send to rank r+1, receive from
//                                                        rank r−1 (mod n)
#pragma once
#include <cstddef>

#include "backends/cuda/nccl_comm.hpp"
#include "core/graph/op_kind.hpp"
#include "core/config/dtype.hpp"

namespace perfsim::cuda {

struct BufferElements {
  std::size_t send = 0;
  std::size_t recv = 0;
};

// Element counts of one rank's send and receive buffers (layouts above).
[[nodiscard]] BufferElements buffer_elements(Collective c, int ranks, std::size_t count);
// The nccl-tests size in bytes of a collective with `count` elements per block: the largest
// of the two buffers (the all-gather output, the reduce-scatter input, ...).
[[nodiscard]] std::size_t collective_bytes(Collective c, int ranks, std::size_t count, DType t);
// The block count whose collective_bytes is closest to `bytes` from below, at least 1.
[[nodiscard]] std::size_t block_count_for(Collective c, int ranks, std::size_t bytes, DType t);

// Enqueues one collective on ctx.stream (called from the rank's thread, on every rank with
// the same arguments but the buffers). Sums for the reducing collectives. Throws
// NotExecutable for a dtype NCCL cannot carry.
void enqueue_collective(const RankContext& ctx, Collective c, DType t, const void* send,
                        void* recv, std::size_t count);

struct CollectiveSpec {
  Collective op = Collective::all_reduce;
  DType dtype = DType::fp32;
  std::size_t bytes = 0;                 // requested nccl-tests size; rounded to whole blocks
  int warmup = 5;                        // untimed collectives first (connection setup, caches)
  int repeats = 20;                      // timed repeats; the median is reported
  double target_repeat_seconds = 2e-4;   // a repeat runs back-to-back collectives for about this
};

struct CollectiveResult {
  Collective op = Collective::all_reduce;
  DType dtype = DType::fp32;
  int ranks = 0;
  std::size_t count = 0;    // elements per block
  std::size_t bytes = 0;    // nccl-tests size actually moved (whole blocks)
  int batch = 1;            // collectives per timed repeat
  double time = 0;          // seconds per collective: median over repeats of the slowest rank
  double min_time = 0;      // seconds: fastest repeat
  double algbw = 0;         // bytes/s = bytes / time
  double busbw = 0;         // bytes/s = algbw · bus_factor(op, ranks)
};

// Runs spec on every rank of comm (buffers allocated here, zero-filled) and times it with
// CUDA events on each rank's stream. Every repeat starts after a host barrier across the
// ranks' threads and holds `batch` back-to-back collectives, batch chosen from one timed
// collective after the warm-up so a repeat lasts about target_repeat_seconds (it amortizes
// the launch skew between the ranks' threads, as nccl-tests' back-to-back iterations do).
[[nodiscard]] CollectiveResult time_collective(const NcclComm& comm, const CollectiveSpec& spec);

}  // namespace perfsim::cuda
