// The blocks an all-to-all moves, as its two tensors' shapes say (core/graph/all_to_all.hpp):
// expert parallelism's dispatch [E, C, h] → [El, ep·C, h] and return, and shapes that fit no
// all-to-all.
#include <doctest/doctest.h>

#include "core/errors.hpp"
#include "core/graph/all_to_all.hpp"

using namespace perfsim;

namespace {

struct AllToAll {
  Graph g;
  Op op;
  AllToAll(std::vector<int64_t> in, std::vector<int64_t> out, int group) {
    Tensor x, y;
    x.name = "x", x.shape = std::move(in);
    y.name = "y", y.shape = std::move(out);
    op.name = "a2a";
    op.kind = OpKind::collective;
    op.inputs = {g.add_tensor(x)};
    op.outputs = {g.add_tensor(y)};
    op.attrs.collective = Collective::all_to_all;
    op.attrs.group = group;
  }
};

}  // namespace

TEST_CASE("all_to_all: dispatch sends each member its experts and lays the blocks out by expert") {
  // 8 experts of 5 rows of 3 over 4 ranks: 2 experts a rank.
  const AllToAll a({8, 5, 3}, {2, 20, 3}, 4);
  CHECK(all_to_all_unfit_reason(a.op, a.g).empty());
  const AllToAllBlocks b = all_to_all_blocks(a.op, a.g);
  CHECK(b.parts == 4);
  CHECK(b.elements == 30);
  // Block j: experts 2j, 2j + 1, one span.
  CHECK(b.send.runs == 1);
  CHECK(b.send.run == 30);
  // Member i's block: its 5 rows of each local expert l at Y[l, 5i .. 5i + 4].
  CHECK(b.recv.runs == 2);
  CHECK(b.recv.run == 15);
  CHECK(b.recv.pitch == 60);
}

TEST_CASE("all_to_all: return sends each member its rows of every local expert") {
  const AllToAll a({2, 20, 3}, {8, 5, 3}, 4);
  const AllToAllBlocks b = all_to_all_blocks(a.op, a.g);
  CHECK(b.elements == 30);
  CHECK(b.send.runs == 2);
  CHECK(b.send.run == 15);
  CHECK(b.send.pitch == 60);
  CHECK(b.recv.runs == 1);
  CHECK(b.recv.run == 30);
}

TEST_CASE("all_to_all: equal shapes are blocks of the first dimension both ways") {
  const AllToAll a({6, 4}, {6, 4}, 3);
  const AllToAllBlocks b = all_to_all_blocks(a.op, a.g);
  CHECK(b.elements == 8);
  CHECK(b.send.runs == 1);
  CHECK(b.send.run == 8);
  CHECK(b.recv.run == 8);
}

TEST_CASE("all_to_all: shapes no all-to-all turns into one another are refused with one line") {
  const AllToAll wrong({8, 5, 3}, {4, 5, 3}, 4);
  CHECK(all_to_all_unfit_reason(wrong.op, wrong.g) ==
        "all_to_all 'a2a' over 4 ranks cannot turn 'x' [8, 5, 3] into 'y' [4, 5, 3]: one dimension must shrink 4 "
        "times and another grow as much");
  CHECK_THROWS_AS((void)all_to_all_blocks(wrong.op, wrong.g), NotExecutable);
  const AllToAll ranks({8, 5, 3}, {2, 20}, 4);
  CHECK_FALSE(all_to_all_unfit_reason(ranks.op, ranks.g).empty());
}
