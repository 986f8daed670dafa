// The collective ops of a rank graph on GPU ranks: one NCCL communicator per group the graph's
// collectives name (RankGroup), made over the run's MPI ranks (the group's first member draws
// the NCCL id, the members exchange it through MPI), and each op issued on its own stream.
//   all_reduce: one tensor (in place or into another); a DDP bucket (the gradients, then the
//     bucket buffer sized for all of them, used by no other op: is_bucket): the gradients copied
//     into the buffer, reduced, copied back; any other list of tensors (the norm gradients under
//     sequence parallelism, hybrid_shard's shards): tensor i it reads reduced into tensor i it
//     writes, in one NCCL group;
//   reduce_scatter: each whole tensor it reads into the rank's flat part it writes (through a
//     scratch part when the two are stored differently: bf16 gradients, fp32 shards);
//   all_gather: each part it reads into the whole tensor it writes;
//   all_to_all: block j of the tensor it reads to member j, member i's block into the tensor it
//     writes (core/graph/all_to_all.hpp), one ncclSend and ncclRecv a member in one NCCL group;
//     strided blocks (expert parallelism's) go through scratch, packed and unpacked by 2-D copies;
//   send_recv: a pipeline edge (ncclSend / ncclRecv over its direction's and edge colour's
//     communicator of the pipeline's stages, core/graph/pipeline_edge.hpp), or on the
//     context stream a step of ring attention (each block it reads to the next member of the
//     context-parallel group, each it writes from the previous one, in one NCCL group).
// ZeRO's parts are ceil(elements / group) long; NCCL's blocks are exact, so a tensor whose
// elements the group does not divide is refused (NotExecutable, before anything runs).
//
// Errors: NCCL neither times out nor reports a lost peer on its own call's return, so a rank
// must not wait for a step in a blocking synchronize. check() polls every communicator's
// asynchronous error (stream_wait.hpp calls it while it waits); on one, and on any NCCL call
// that fails, every communicator is aborted (ncclCommAbort, which also ends the collectives
// still running on the device) and NcclError names the NCCL error, its last-error text and
// the group of ranks. The caller ends every rank (cli/ranks.cpp).
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_allocator.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "core/graph/graph.hpp"
#include "core/run/communicator.hpp"

namespace perfsim::cuda {

// An NCCL call failed, or a communicator reported an asynchronous error; the communicators
// are aborted.
struct NcclError : CudaError {
  using CudaError::CudaError;
};

class NcclRanks {
 public:
  // Communicators are made by prepare(), per graph.
  explicit NcclRanks(Communicator& ranks);
  NcclRanks(const NcclRanks&) = delete;
  NcclRanks& operator=(const NcclRanks&) = delete;
  // Destroys the communicators; during stack unwinding (an error ends the rank) it aborts them
  // instead, since ncclCommDestroy would wait for collectives a failed peer never joins.
  ~NcclRanks();

  [[nodiscard]] int rank() const { return m_ranks.rank(); }
  // "" when `op` can run between GPU ranks; otherwise why not.
  [[nodiscard]] static std::string unsupported_reason(const Op& op, const Graph& g);
  // Whether all_reduce `op` reduces a DDP bucket: two or more tensors read and written in place,
  // the last one as many elements of the same type as the others together, and read or written
  // by no other op of g (the bucket buffer). Scans g: computed once per graph by the caller.
  [[nodiscard]] static bool is_bucket(const Op& op, const Graph& g);
  // Issues `op` on `stream`; scratch comes from `alloc` and is returned once the stream is
  // done with it (a stream-ordered free: the caching allocator reuses it for later work on
  // the same device only after the stream's work is queued, which is its order). bucket:
  // is_bucket(op, g).
  void run(const Op& op, const Graph& g, const std::vector<void*>& buffers, cudaStream_t stream,
           CachingAllocator& alloc, bool bucket);

  // `count` fp32 values of every member of `group`, summed or maxed in place on `stream`
  // (ncclAllReduce); `what` names the op in error messages (the vocabulary-parallel loss).
  enum class Reduction { sum, max };
  void all_reduce(float* data, std::size_t count, RankGroup group, Reduction r, cudaStream_t stream,
                  const std::string& what);

  // `bytes` of device memory sent to (send) or received from world rank `peer` on `stream`
  // (ncclSend / ncclRecv over a communicator of every rank of its own, made on first use: both
  // ranks must then call at once); `what` names the transfer in error messages (a
  // disaggregated engine's KV pages).
  void point_to_point(void* data, std::size_t bytes, int peer, bool send, cudaStream_t stream, const std::string& what);

  // Makes every communicator `g`'s collectives need, before any of them is issued: in one order
  // on every rank (by group size, stride and lane), with nothing of this rank's on the GPU yet.
  // Made on first use instead, the communicators of different groups would be made in each
  // rank's own program order, and a rank blocked making one (ncclCommInitRank waits for the
  // group) while a peer waits on its GPU for a transfer this rank has not issued would hang.
  void prepare(const Graph& g);

  // Throws NcclError after aborting every communicator when one reports an asynchronous error
  // (or when they were aborted before). Cheap: a few flag reads per communicator.
  void check();
  // Aborts every communicator without throwing (a wait that must give up); idempotent.
  void abort() noexcept;
  [[nodiscard]] bool aborted() const { return !m_abort_reason.empty(); }

 private:
  struct Comm {
    void* comm = nullptr;  // ncclComm_t (opaque), untyped for builds without NCCL
    RankGroup group;
    std::string last;      // the op that last issued a collective on it
  };
  // The communicator of the group holding this rank, made on first use (prepare makes them
  // first); `what` is the op about to use it. A lane other than 0 is another communicator of
  // the same group, for transfers that must not queue behind the group's other work.
  Comm& comm(RankGroup g, const std::string& what, int lane = 0);
  static constexpr int ring_lane = 2;  // ring attention's steps: a communicator of their own
  static constexpr int point_to_point_lane = 4;  // point_to_point's transfers, apart from steps'
  // A pipeline's transfers go over its stages' group (places are stages), one communicator per
  // direction and edge colour (core/graph/pipeline_edge.hpp): lane 8 + 3·backward + colour. So
  // the two directions, each on streams of their own, never wait on one another (1F1B sends
  // one micro-batch forward while the neighbour sends another's gradient back), nor a stage's
  // sends on its receives.
  static constexpr int pipeline_lane = 8;
  [[nodiscard]] static constexpr int pipeline_lane_of(bool backward, int colour) {
    return pipeline_lane + 3 * (backward ? 1 : 0) + colour;
  }
  struct CommKey {
    RankGroup group;
    int lane = 0;
  };
  // The communicator collective `op` runs over.
  [[nodiscard]] CommKey comm_key(const Op& op) const;
  // The stages of the pipeline that pipeline transfer `op` crosses: pp ranks pp_stride apart.
  [[nodiscard]] RankGroup pipeline_group(const Op& op) const;
  // An NCCL result that is not success: aborts every communicator and throws NcclError naming
  // the call (null: an asynchronous error), the error and the group (c may be null before the
  // communicator exists).
  void check_result(int result, const char* call, const Comm* c, RankGroup group, const std::string& what);
  [[noreturn]] void fail(const std::string& message);
  [[nodiscard]] std::string describe(RankGroup g) const;  // "ranks 0 and 1", "all 4 ranks"

  Communicator& m_ranks;
  std::map<std::tuple<int, int, int>, Comm> m_comms;  // (size, stride, lane) -> communicator
  std::string m_abort_reason;                   // set once the communicators are aborted
};

}  // namespace perfsim::cuda
