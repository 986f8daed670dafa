// Where a context-parallel rank's tokens lie in the whole batch: each sequence cut into 2·cp
// chunks, the rank's two (its place's and the mirror one, causal load balance) in order, alone
// and below the data-parallel rank's part of the batch.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "core/graph/graph.hpp"

using namespace perfsim;

namespace {

std::vector<int64_t> whole_offsets(const Tensor& t, int rank) {
  std::vector<int64_t> at(static_cast<std::size_t>(t.elements()), -1);
  for_each_whole_run(t, rank, [&](int64_t local, int64_t whole, int64_t n) {
    for (int64_t i = 0; i < n; ++i) at[static_cast<std::size_t>(local + i)] = whole + i;
  });
  return at;
}

Shard chunks(std::vector<int64_t> whole, int parts, int stride) {
  Shard s{"tokens", std::move(whole), 1, parts, stride};
  s.balanced = true;
  return s;
}

}  // namespace

TEST_CASE("shard chunks: a context-parallel rank holds chunks c and 2·cp − 1 − c of each sequence") {
  // Two sequences of 8, cp = 2: chunks of 2; place 0 holds positions 0-1 and 6-7, place 1 2-5.
  Tensor t;
  t.shape = {8};
  t.shard = {chunks({2, 8}, 2, 1)};
  CHECK(whole_offsets(t, 0) == std::vector<int64_t>{0, 1, 6, 7, 8, 9, 14, 15});
  CHECK(whole_offsets(t, 1) == std::vector<int64_t>{2, 3, 4, 5, 10, 11, 12, 13});
  // cp = 4 at stride 2 (tensor-parallel ranks inside): global rank 5 is place 2 of chunks of 1,
  // positions 2 and 5.
  t.shard = {chunks({2, 8}, 4, 2)};
  t.shape = {4};
  CHECK(whole_offsets(t, 5) == std::vector<int64_t>{2, 5, 10, 13});
}

TEST_CASE("shard chunks: below the data-parallel rank's sequences") {
  // dp = 2 (stride 2) over 4 sequences of 8, then cp = 2 (stride 1): global rank 3 holds
  // sequences 2-3, positions 2-5 of each.
  Tensor t;
  t.shape = {8};
  t.shard = {Shard{"tokens", {4, 8}, 0, 2, 2}, chunks({2, 8}, 2, 1)};
  CHECK(whole_offsets(t, 3) == std::vector<int64_t>{18, 19, 20, 21, 26, 27, 28, 29});
  CHECK(whole_offsets(t, 0) == std::vector<int64_t>{0, 1, 6, 7, 8, 9, 14, 15});
}

TEST_CASE("shard chunks: a sequence that does not split into 2·cp chunks, or micro-batches of chunks, throw") {
  Tensor t;
  t.shape = {6};
  t.shard = {chunks({1, 6}, 2, 1)};
  CHECK_THROWS_AS(whole_offsets(t, 0), std::logic_error);
  t.shard = {chunks({1, 8}, 2, 1)};
  t.shard.front().micros = 2;
  CHECK_THROWS_AS(whole_offsets(t, 0), std::logic_error);
}
