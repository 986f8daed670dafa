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
// Pipeline receives, of activations and of gradients: apart from the sends of the same
// direction, so that a stage sending one micro-batch onward never holds up its receive of
// another. The interleaved schedule needs it: its stages pass activations around a ring
// (stage pp − 1 feeds stage 0's next chunk), and a send queued before a receive on one stream
// would wait for a neighbour that waits for that receive.
inline constexpr int pipeline_recv_stream = 7;
inline constexpr int pipeline_grad_recv_stream = 8;

[[nodiscard]] constexpr bool is_pipeline_stream(int stream) {
  return stream == pipeline_stream || stream == pipeline_grad_stream || stream == pipeline_recv_stream ||
         stream == pipeline_grad_recv_stream;
}

}  // namespace perfsim
