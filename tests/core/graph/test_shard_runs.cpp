// Where a rank's part of a tensor lies in the whole, through one shard and through parts cut from
// parts (a routed expert's weight: its rank's experts, then its part of each expert's width, or a
// ZeRO flat part of its experts).
#include <doctest/doctest.h>

#include <vector>

#include "core/graph/graph.hpp"

using namespace perfsim;

namespace {

// Whole offsets of each local element of t for `rank`, −1 where none (a padded tail).
std::vector<int64_t> whole_offsets(const Tensor& t, int rank) {
  std::vector<int64_t> at(static_cast<std::size_t>(t.elements()), -1);
  int64_t last = -1;
  for_each_whole_run(t, rank, [&](int64_t local, int64_t whole, int64_t n) {
    CHECK(local > last);  // in order of the local offset
    last = local;
    for (int64_t i = 0; i < n; ++i) at[static_cast<std::size_t>(local + i)] = whole + i;
  });
  return at;
}

}  // namespace

TEST_CASE("shard runs: one level is the part its place names") {
  Tensor t;
  t.shape = {2, 3};
  t.shard = {Shard{"w", {4, 3}, 0, 2, 1}};
  CHECK(whole_offsets(t, 1) == std::vector<int64_t>{6, 7, 8, 9, 10, 11});
  CHECK(place_of(t.shard[0], 3) == 1);
  Tensor whole;
  whole.shape = {4};
  CHECK(whole_offsets(whole, 5) == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("shard runs: experts over ep, then each one's width over tp") {
  // Whole [4 experts, 2, 4]; ep = 2 at stride 2 (dim 0), tp = 2 at stride 1 (dim 2): global rank
  // 3 holds experts 2..3 and columns 2..3 of each.
  Tensor t;
  t.shape = {2, 2, 2};
  t.shard = {Shard{"w", {4, 2, 4}, 0, 2, 2}, Shard{"w", {2, 2, 4}, 2, 2, 1}};
  const std::vector<int64_t> want{18, 19, 22, 23, 26, 27, 30, 31};  // (e·2 + r)·4 + c, e ≥ 2, c ≥ 2
  CHECK(whole_offsets(t, 3) == want);
  CHECK(whole_offsets(t, 0) == std::vector<int64_t>{0, 1, 4, 5, 8, 9, 12, 13});
}

TEST_CASE("shard runs: a flat ZeRO part of a rank's experts, padded") {
  // The rank's experts are elements 10..19 of a whole of 20 (ep place 1 of 2, stride 1); ZeRO
  // cuts those 10 into 4-element parts over 3 ranks at stride 2: the last holds 2 and a pad.
  Tensor t;
  t.shape = {4};
  t.shard = {Shard{"w", {4, 5, 1}, 0, 2, 1}, Shard{"w", {2, 5, 1}, -1, 3, 2}};
  CHECK(whole_offsets(t, 1) == std::vector<int64_t>{10, 11, 12, 13});  // ZeRO place 0
  CHECK(whole_offsets(t, 3) == std::vector<int64_t>{14, 15, 16, 17});  // place 1
  CHECK(whole_offsets(t, 5) == std::vector<int64_t>{18, 19, -1, -1});  // place 2, padded
  CHECK(whole_offsets(t, 4) == std::vector<int64_t>{8, 9, -1, -1});    // ep place 0
}

TEST_CASE("shard runs: a flat part that spans the breaks of a strided outer part") {
  // tp = 2 takes columns (dim 1) of a [2, 6] whole: the rank's [2, 3] lies in two runs; ZeRO's
  // 2-element parts of its 6 elements over 4 ranks: the second crosses the break, the last is
  // all padding.
  Tensor t;
  t.shape = {2};
  t.shard = {Shard{"w", {2, 6}, 1, 2, 1}, Shard{"w", {2, 3}, -1, 4, 2}};
  CHECK(whole_offsets(t, 3) == std::vector<int64_t>{5, 9});    // tp 1, ZeRO 1
  CHECK(whole_offsets(t, 2) == std::vector<int64_t>{2, 6});    // tp 0, ZeRO 1
  CHECK(whole_offsets(t, 7) == std::vector<int64_t>{-1, -1});  // tp 1, ZeRO 3
}
