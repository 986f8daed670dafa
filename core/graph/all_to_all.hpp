// The data an all-to-all op moves (Collective::all_to_all), as every executor must move it.
// The op reads one tensor X and writes one tensor Y of the same rank over a group of n ranks:
// X is cut along its split dimension s into n blocks, block j going to member j; Y joins the
// n blocks received along its concatenation dimension c, member i's block at i. The shapes say
// which dimensions: X[s] = n·Y[s], Y[c] = n·X[c], every other dimension equal (s ≠ c).
//
// Expert parallelism (core/builders/moe.cpp, El = E / n experts a rank, C rows an expert buffer):
//   dispatch  X [E, C, h] → Y [El, n·C, h]  (s = 0, c = 1): block j is experts j·El .. (j+1)·El − 1
//             of this rank's tokens; Y[l, i·C + r] is row r of member i's buffer for local expert l
//             (the blocks arrive as (member, expert) and are laid out as (expert, member));
//   return    X [El, n·C, h] → Y [E, C, h]  (s = 1, c = 0): block j is rows j·C .. (j+1)·C − 1 of
//             every local expert, member j's tokens; Y's experts i·El .. (i+1)·El − 1 come from
//             member i. Backward moves the gradients the same two ways.
#pragma once
#include <cstdint>
#include <string>

#include "core/graph/graph.hpp"

namespace perfsim {

// Where one block lies in a tensor, in elements: `runs` runs of `run` contiguous elements, run r
// of block b starting at b·run + r·pitch. Read in order, the runs are the block as sent.
struct BlockRuns {
  int64_t runs = 1, run = 0, pitch = 0;
};

struct AllToAllBlocks {
  int parts = 1;         // the group's ranks: blocks sent and received
  int64_t elements = 0;  // of one block
  BlockRuns send;        // the blocks in X
  BlockRuns recv;        // the blocks in Y
};

// Empty when all-to-all `op` reads and writes one tensor each, laid out as above; else why not.
[[nodiscard]] std::string all_to_all_unfit_reason(const Op& op, const Graph& g);
// Throws NotExecutable with all_to_all_unfit_reason's line when it is not empty.
[[nodiscard]] AllToAllBlocks all_to_all_blocks(const Op& op, const Graph& g);

}  // namespace perfsim
