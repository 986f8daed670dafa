// The collective ops of a rank graph on GPU ranks: one NCCL communicator per group the graph's
// collectives name (RankGroup), made over the run's MPI ranks (the group's first member draws
// the NCCL id, the members exchange it through MPI), and each op issued on its own stream.
//   all_reduce: one tensor in place, or a DDP bucket (the gradients, then the bucket buffer
//     sized for all of them): the gradients copied into the buffer, reduced, copied back;
//   reduce_scatter: each whole tensor it reads into the rank's flat part it writes (through a
//     scratch part when the two are stored differently: bf16 gradients, fp32 shards);
//   all_gather: each part it reads into the whole tensor it writes;
//   send_recv: a pipeline edge (ncclSend / ncclRecv over the world communicator).
// ZeRO's parts are ceil(elements / group) long; NCCL's blocks are exact, so a tensor whose
// elements the group does not divide is refused (NotExecutable, before anything runs).
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_allocator.hpp"
#include "core/graph/graph.hpp"
#include "core/run/communicator.hpp"

namespace perfsim::cuda {

class NcclRanks {
 public:
  // Makes the world's communicator at once (every rank joins here, in step), for the pipeline
  // edges' point-to-point transfers.
  explicit NcclRanks(Communicator& ranks);
  NcclRanks(const NcclRanks&) = delete;
  NcclRanks& operator=(const NcclRanks&) = delete;
  ~NcclRanks();

  [[nodiscard]] int rank() const { return m_ranks.rank(); }
  // "" when `op` can run between GPU ranks; otherwise why not.
  [[nodiscard]] static std::string unsupported_reason(const Op& op, const Graph& g);
  // Issues `op` on `stream`; scratch comes from `alloc` and is returned once the stream is
  // done with it (a stream-ordered free: the caching allocator reuses it for later work on
  // the same device only after the stream's work is queued, which is its order).
  void run(const Op& op, const Graph& g, const std::vector<void*>& buffers, cudaStream_t stream,
           CachingAllocator& alloc);

 private:
  void* comm(RankGroup g);  // ncclComm_t of the group holding this rank, made on first use

  Communicator& m_ranks;
  std::map<std::pair<int, int>, void*> m_comms;  // (size, stride) -> ncclComm_t
};

}  // namespace perfsim::cuda
