// Polled waits for GPU ranks (see stream_wait.hpp).
#include "backends/cuda/stream_wait.hpp"

#include <chrono>
#include <optional>
#include <thread>

#include "backends/cuda/cuda_check.hpp"

namespace perfsim::cuda {

namespace {

using Clock = std::chrono::steady_clock;
// For this long a wait only yields between polls, as cudaStreamSynchronize's own spin does; it
// sleeps 1 ms between polls after that. A rank that wakes from a sleep up to a millisecond late
// starts its next pass late, and the first collective of that pass on the other ranks would time
// the skew: steps shorter than this keep the synchronize's promptness, and in longer ones the
// skew is a small part of the step.
constexpr auto spin_time = std::chrono::milliseconds(200);
constexpr auto nap = std::chrono::milliseconds(1);

void pause_since(Clock::time_point start) {
  if (Clock::now() - start < spin_time) std::this_thread::yield();
  else std::this_thread::sleep_for(nap);
}

// Polls query() (cudaStreamQuery, cudaEventQuery) until the work is done, checking the NCCL
// communicators between polls.
template <class Query>
void poll(Query query, NcclRanks& ranks, const char* call) {
  const Clock::time_point start = Clock::now();
  for (;;) {
    const cudaError_t e = query();
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) throw_cuda_status(e, call, __FILE__, __LINE__);
    (void)cudaGetLastError();  // "not ready" is no error: leave none behind for the next launch check
    ranks.check();
    pause_since(start);
  }
}

}  // namespace

void wait_stream(cudaStream_t s, NcclRanks* ranks) {
  if (ranks == nullptr) {
    PERFSIM_CUDA_CHECK(cudaStreamSynchronize(s));
    return;
  }
  poll([s] { return cudaStreamQuery(s); }, *ranks, "cudaStreamQuery");
}

void wait_event(cudaEvent_t e, NcclRanks* ranks) {
  if (ranks == nullptr) {
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(e));
    return;
  }
  poll([e] { return cudaEventQuery(e); }, *ranks, "cudaEventQuery");
}

bool drain_stream(cudaStream_t s, NcclRanks* ranks, double give_up_s) noexcept {
  if (ranks == nullptr) return cudaStreamSynchronize(s) == cudaSuccess;
  const Clock::time_point start = Clock::now();
  std::optional<Clock::time_point> aborted_at;
  for (;;) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e != cudaErrorNotReady) return e == cudaSuccess;
    (void)cudaGetLastError();
    try {
      ranks->check();  // aborts the communicators on an asynchronous error
    } catch (...) {    // the error is already on its way up, or this is cleanup after it
    }
    if (ranks->aborted()) {
      if (!aborted_at) aborted_at = Clock::now();
      if (std::chrono::duration<double>(Clock::now() - *aborted_at).count() > give_up_s) return false;
    }
    pause_since(start);
  }
}

}  // namespace perfsim::cuda
