// The streams ops are issued on, in one place. Stream 0 is the main stream (program order);
// a side stream forks from it where its op is issued (core/graph/graph.hpp, Op::stream).
#pragma once

namespace perfsim {

inline constexpr int copy_stream = 1;      // host-to-device prefetches (prefetch pass)
inline constexpr int gather_stream = 2;    // ZeRO-3 parameter all-gathers (prefetch)
inline constexpr int gradient_stream = 3;  // data-parallel gradient all-reduces and reduce-scatters
inline constexpr int pipeline_stream = 4;  // pipeline sends and receives at a stage's edges
inline constexpr int context_stream = 5;   // ring attention's K/V (and dK/dV) send/recv

}  // namespace perfsim
