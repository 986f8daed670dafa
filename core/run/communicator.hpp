// The ranks of a parallel run as an executing backend sees them: this process's
// place among them, and the collectives a rank graph's ops perform on the
// groups a layout defines. One process per rank (launched by mpirun, srun or
// `perfsim run --gpus N`); backends/mpi holds the implementation over MPI.
// Plain C++: nothing here names MPI or NCCL.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace perfsim {

// The group of `size` ranks `stride` apart that holds a rank, as a collective
// op's attrs name it (OpAttrs::group, group_stride): with global rank r its
// members are base + i·stride for i = 0 .. size − 1, where base = r −
// place·stride and place = (r / stride) mod size.
struct RankGroup {
  int size = 1;
  int stride = 1;
  // This rank's place in its group, 0 .. size − 1.
  [[nodiscard]] int place(int rank) const { return (rank / stride) % size; }
  // The global rank of member `i` of the group holding `rank`.
  [[nodiscard]] int member(int rank, int i) const { return rank - place(rank) * stride + i * stride; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  [[nodiscard]] virtual int rank() const = 0;  // 0 .. size() − 1
  [[nodiscard]] virtual int size() const = 0;
  // The host this rank runs on (for messages that name a rank).
  [[nodiscard]] virtual std::string host() const = 0;

  // Collectives over the group holding this rank; every member calls with the
  // same counts. Sum of `count` floats of every member, in place.
  virtual void all_reduce_sum(float* data, int64_t count, RankGroup g) = 0;
  // in: size·count floats; out: this rank's `count` of the element-wise sum,
  // block place(rank).
  virtual void reduce_scatter_sum(const float* in, float* out, int64_t count, RankGroup g) = 0;
  // in: `bytes` of this rank; out: size·bytes, member i's block at i·bytes.
  virtual void all_gather(const void* in, void* out, int64_t bytes, RankGroup g) = 0;
  // in: size blocks of `bytes`, block i for member i; out: size blocks, block i
  // from member i.
  virtual void all_to_all(const void* in, void* out, int64_t bytes, RankGroup g) = 0;
  // Point to point, between two ranks of the world. `send` returns once the data is copied, not
  // once it is received: a pipeline stage sends a micro-batch's activation and goes on with the
  // next while its neighbour, busy with a backward, receives it later. Messages of one `tag`
  // arrive in the order sent; tags keep kinds apart (a pipeline's activations and gradients
  // between the same two ranks: with interleaved chunks both go either way).
  virtual void send(const void* data, int64_t bytes, int to, int tag = 0) = 0;
  virtual void recv(void* data, int64_t bytes, int from, int tag = 0) = 0;
  // Every rank of the world.
  virtual void barrier() = 0;
  // Rank 0 receives every rank's text, in rank order (others get an empty
  // vector).
  [[nodiscard]] virtual std::vector<std::string> gather_to_root(const std::string& text) = 0;
  // Rank 0's bytes, to every rank (`data` is rank 0's input and everyone's
  // output).
  virtual void broadcast(void* data, int64_t bytes) = 0;
  // Ends every rank now with `code` (a rank that failed must not leave the
  // others waiting).
  [[noreturn]] virtual void abort(int code) = 0;
};

// Rank 0's `text` to every rank (its length, then its bytes): every rank calls it, and every
// rank's `text` is rank 0's after.
inline void broadcast_text(Communicator& ranks, std::string& text) {
  int64_t n = static_cast<int64_t>(text.size());
  ranks.broadcast(&n, sizeof n);
  text.resize(static_cast<std::size_t>(n));
  if (n > 0) ranks.broadcast(text.data(), n);
}

}  // namespace perfsim
