// Algorithm and bus bandwidth of a collective, with the nccl-tests definitions
// (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md). Plain C++ with no CUDA or NCCL include,
// so the unit tests check it against the cost model's formulas on machines without a GPU.
//
// `bytes` is the nccl-tests "size" of the operation on one rank: the all-reduce buffer, the
// all-gather OUTPUT (all ranks' blocks), the reduce-scatter INPUT, the all-to-all send buffer
// (one block per peer), the send/recv message.
#pragma once
#include "core/graph/op_kind.hpp"

namespace perfsim::cuda {

// busbw / algbw: the fraction of `bytes` each rank must put on the wire, so that busbw is
// comparable with the link bandwidth whatever the rank count (nccl-tests PERFORMANCE.md):
// all-reduce 2(n−1)/n; all-gather, reduce-scatter, all-to-all (n−1)/n; send/recv 1.
[[nodiscard]] constexpr double bus_factor(Collective c, int ranks) {
  if (ranks <= 1) return c == Collective::send_recv ? 1.0 : 0.0;
  const double n = ranks;
  switch (c) {
    case Collective::all_reduce: return 2.0 * (n - 1.0) / n;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all: return (n - 1.0) / n;
    case Collective::send_recv: return 1.0;
  }
  return 0.0;
}

// algbw = bytes / time (bytes/s).
[[nodiscard]] constexpr double algorithm_bandwidth(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds : 0.0;
}

// busbw = algbw · bus_factor (bytes/s).
[[nodiscard]] constexpr double bus_bandwidth(Collective c, int ranks, double bytes, double seconds) {
  return algorithm_bandwidth(bytes, seconds) * bus_factor(c, ranks);
}

}  // namespace perfsim::cuda
