// Waiting for a step's device work on GPU ranks. NCCL collectives have no deadline of their
// own: a rank blocked in cudaStreamSynchronize behind a collective whose peer failed would
// wait until --rank-timeout's watchdog. Joined to ranks (ranks not null), these waits poll
// instead: the stream or event queried, every NCCL communicator checked for an asynchronous
// error (NcclRanks::check, which aborts them and throws NcclError), yielding between polls for
// the first 200 ms of a wait (the promptness of a synchronize, which keeps the ranks' passes
// aligned) and sleeping 1 ms between them after that. Alone (ranks null), a plain blocking
// synchronize.
#pragma once
#include <cuda_runtime.h>

#include "backends/cuda/nccl_ranks.hpp"

namespace perfsim::cuda {

void wait_stream(cudaStream_t s, NcclRanks* ranks);
void wait_event(cudaEvent_t e, NcclRanks* ranks);

// For destructors and cleanup: waits for `s` without throwing. Joined to ranks, an
// asynchronous NCCL error aborts the communicators, and once they are aborted the wait gives up
// after `give_up_s` seconds (an aborted collective that still does not return must not keep the
// rank from ending). Returns whether the stream finished without an error.
bool drain_stream(cudaStream_t s, NcclRanks* ranks, double give_up_s = 10.0) noexcept;

}  // namespace perfsim::cuda
