// Holds a stream until the host lets it go: hold() enqueues a one-thread kernel that spins on a
// flag in mapped host memory, release() sets the flag. Work issued on the stream (and on streams
// forked from it) in between queues behind the kernel and then runs back to back, as it does in
// a device-bound loop whose host runs ahead; timing events then measure the device alone,
// without the time the device sat waiting for the host to issue the next op.
// A hold gives up after `timeout` seconds (the host may block on a full launch queue before it
// can release), and released() says whether the last hold ended by release.
#pragma once
#include <cuda_runtime.h>

namespace perfsim::cuda {

class StreamHold {
 public:
  StreamHold();
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  ~StreamHold();

  void hold(cudaStream_t s, double timeout_seconds);
  void release();
  // After the held work finished (the stream synchronized): whether the last hold was released
  // by release() rather than by its timeout.
  [[nodiscard]] bool released() const;

 private:
  unsigned* m_flags = nullptr;  // mapped host memory: [0] the ticket to release, [1] the ticket that timed out
  unsigned* m_device_flags = nullptr;
  unsigned m_ticket = 0;
};

}  // namespace perfsim::cuda
