// Collective ops of a rank graph between CPU ranks, through the run's
// Communicator (MPI's own collectives): the data a GPU rank would move with
// NCCL, moved for real, so a sharded step on CPU ranks computes what the
// unsharded step does.
#pragma once
#include <string>
#include <vector>

#include "core/graph/graph.hpp"
#include "core/run/communicator.hpp"

namespace perfsim::cpu {

// Empty when the CPU ranks can run collective `op`; otherwise why not.
[[nodiscard]] std::string collective_unsupported_reason(const Op& op);

// Runs collective `op` of `g` for global rank ranks.rank(); buffers[id] holds
// each operand.
//   all_reduce: the tensors it reads, end to end, summed (averaged with
//   attrs.average) over the
//     group into the tensors it writes (the same ones for a DDP bucket);
//   reduce_scatter: whole tensor i it reads → the rank's flat part of it,
//   tensor i it writes
//     (Shard, dim −1), summed or averaged;
//   all_gather: the rank's flat part i it reads → whole tensor i it writes;
//   all_to_all: the blocks of the tensor it reads to the members, theirs into the tensor it
//     writes (core/graph/all_to_all.hpp: expert parallelism's dispatch and return);
//   send_recv: a pipeline edge, the tensor it reads sent to the next stage in forward (the
//     previous in backward), the tensor it writes received from the other side; on the context
//     stream a step of ring attention, the tensors it reads sent to the next rank of the group
//     and those it writes received from the previous one.
void execute_collective(const Op& op, const Graph& g, const std::vector<void*>& buffers, Communicator& ranks);

}  // namespace perfsim::cpu
