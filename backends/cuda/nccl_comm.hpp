// An NCCL communicator over GPUs of this process: rank i runs on devices[i], each rank owns a
// stream, and work is issued from one host thread per GPU (NCCL's blocking calls of one rank
// would otherwise wait for peers that the same thread has not launched yet).
// Without NCCL in the build (PERFSIM_HAVE_NCCL unset) the class still compiles; constructing
// one throws NotExecutable.
#pragma once
#include <cuda_runtime.h>

#include <barrier>
#include <functional>
#include <string>
#include <vector>

#ifdef PERFSIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace perfsim::cuda {

// True when perfsim was built against NCCL.
[[nodiscard]] bool nccl_available();
// Version of the NCCL library linked at run time ("2.27.7"), "" without NCCL.
[[nodiscard]] std::string nccl_version();

// What the thread of one rank works with.
struct RankContext {
  int rank = 0;
  int ranks = 1;
  int device = 0;            // the current device of the calling thread
  cudaStream_t stream = nullptr;
#ifdef PERFSIM_HAVE_NCCL
  ncclComm_t comm = nullptr;
#endif
  std::barrier<>* ranks_barrier = nullptr;
  // Host barrier across all ranks' threads (e.g. so every rank starts a timed repeat together).
  void sync_ranks() const { ranks_barrier->arrive_and_wait(); }
};

class NcclComm {
 public:
  // One communicator per entry of `devices` (distinct device ordinals), built with
  // ncclCommInitAll. Throws NotExecutable without NCCL or with an invalid device list.
  explicit NcclComm(std::vector<int> devices);
  // Over the first `count` visible GPUs (all of them when count <= 0).
  [[nodiscard]] static NcclComm over_visible(int count = 0);
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  NcclComm(NcclComm&& o) noexcept;
  NcclComm& operator=(NcclComm&&) = delete;
  ~NcclComm();

  [[nodiscard]] int size() const { return static_cast<int>(m_ranks.size()); }
  [[nodiscard]] int device(int rank) const { return m_ranks.at(rank).device; }
  [[nodiscard]] cudaStream_t stream(int rank) const { return m_ranks.at(rank).stream; }

  // Runs fn on every rank at once, each in its own thread with the rank's device current,
  // joins them, and rethrows the exception of the lowest failing rank. A rank that throws
  // drops out of the barrier so the others do not wait for it there (they may still block
  // inside NCCL on a collective it never issued: validate arguments before calling this).
  void for_each_rank(const std::function<void(const RankContext&)>& fn) const;

 private:
  struct Rank {
    int device = 0;
    cudaStream_t stream = nullptr;
    void* comm = nullptr;  // ncclComm_t (an opaque pointer), kept untyped for builds without NCCL
  };
  std::vector<Rank> m_ranks;
};

}  // namespace perfsim::cuda
