// The streams ops are issued on, in one place. Stream 0 is the main stream (program order);
// a side stream forks from it where its op is issued (core/graph/graph.hpp, Op::stream).
#pragma once

namespace perfsim {

inline constexpr int copy_stream = 1;      // host-to-device prefetches (prefetch pass)
inline constexpr int gather_stream = 2;    // ZeRO-3 parameter all-gathers (prefetch)
inline constexpr int gradient_stream = 3;  // data-parallel gradient all-reduces and reduce-scatters
inline constexpr int pipeline_stream = 4;  // pipeline sends and receives of activations (forward)
inline constexpr int context_stream = 5;   // ring attention's K/V (and dK/dV) send/recv
// Pipeline sends and receives of gradients (backward). Apart from the activations' so that a
// stage that sends a micro-batch's activation while its neighbour sends back another's gradient
// (1F1B's steady state) waits on neither: each direction's transfers pair up in order.
inline constexpr int pipeline_grad_stream = 6;

[[nodiscard]] constexpr bool is_pipeline_stream(int stream) {
  return stream == pipeline_stream || stream == pipeline_grad_stream;
}

}  // namespace perfsim
