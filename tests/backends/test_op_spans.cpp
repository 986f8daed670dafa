// Op times from the device's records of a step (backends/common/op_spans.hpp), by hand: launch gaps
// belong to the op after them, waiting on another stream belongs to no op, ops without work
// take 0, and one stream's ops add up to the span of its work.
#include <doctest/doctest.h>

#include <numeric>

#include "approx.hpp"
#include "backends/common/op_spans.hpp"

using namespace perfsim;
using perfsim::test::approx;

TEST_CASE("op spans: one stream, the gap before an op is the op's") {
  // Kernels at [1000, 3000], [3500, 4000] and [4100, 10100] ns.
  const std::vector<OpSpan> ops{{1000, 3000}, {3500, 4000}, {4100, 10100}};
  const std::vector<double> t = op_times_from_spans(ops);
  REQUIRE(t.size() == 3);
  CHECK(t[0] == approx(2.0e-6));  // the first op: its own span
  CHECK(t[1] == approx(1.0e-6));  // 0.5 µs gap + 0.5 µs kernel
  CHECK(t[2] == approx(6.1e-6));  // 0.1 µs gap + 6 µs kernel
  CHECK(std::accumulate(t.begin(), t.end(), 0.0) == approx(9.1e-6));  // first start to last end
}

TEST_CASE("op spans: an op of several kernels spans its first start to its last end") {
  // Op 1 launched two kernels, [2000, 2600] and [2700, 5000]: its span is [2000, 5000].
  OpSpan multi;
  multi.first = 2000, multi.last = 5000;
  const std::vector<double> t = op_times_from_spans({{0, 1500}, multi});
  CHECK(t[1] == approx(3.5e-6));  // from op 0's end at 1500 ns
}

TEST_CASE("op spans: waiting on another stream is no op's time") {
  // Op 0 on stream 0, op 1 on stream 1 after a fork, op 2 on stream 0 after a join that
  // waited for op 1.
  OpSpan a{1000, 2000}, side{2100, 9000}, joined{9500, 10000};
  side.stream = 1, side.waits_elsewhere = true;
  joined.waits_elsewhere = true;
  const std::vector<double> t = op_times_from_spans({a, side, joined});
  CHECK(t[0] == approx(1.0e-6));
  CHECK(t[1] == approx(6.9e-6));  // its own span: not from op 0's end
  CHECK(t[2] == approx(0.5e-6));  // not from 2000 ns (stream 0's last end): it waited for the join
  // Without the join, the 7.5 µs since op 0 would have been op 2's.
  joined.waits_elsewhere = false;
  CHECK(op_times_from_spans({a, side, joined})[2] == approx(8.0e-6));
}

TEST_CASE("op spans: an op without work takes 0 and leaves its stream's end alone") {
  OpSpan none;  // no record
  const std::vector<double> t = op_times_from_spans({{1000, 2000}, none, {2500, 3000}});
  CHECK(t[1] == 0.0);
  CHECK(t[2] == approx(1.0e-6));  // from op 0's end
  // A record that starts before the stream's last end (overlap) is timed from its own start.
  CHECK(op_times_from_spans({{1000, 2000}, {1800, 2500}})[1] == approx(0.7e-6));
}
