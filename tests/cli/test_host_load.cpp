// The busy share of the machine from two /proc/stat readings, and the warning it gives.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "cli/host_load.hpp"

using namespace perfsim;
using perfsim::test::approx;

TEST_CASE("busy share: 1 - (idle + iowait) / all, between two readings") {
  // user nice system idle iowait irq softirq steal guest guest_nice; the guest fields are
  // already in user and nice.
  const char* before = "cpu  100 0 50 800 50 0 0 0 40 0\ncpu0 50 0 25 400 25 0 0 0 20 0\n";
  // +60 user, +20 system, +100 idle, +20 iowait: 200 in all, 120 idle -> 40% busy.
  const char* after = "cpu  160 0 70 900 70 0 0 0 90 0\ncpu0 80 0 35 450 35 0 0 0 45 0\n";
  REQUIRE(busy_share(before, after).has_value());
  CHECK(*busy_share(before, after) == approx(0.4));
}

TEST_CASE("busy share: none when the readings do not parse or no time passed") {
  CHECK_FALSE(busy_share("", "cpu 1 2 3 4").has_value());
  CHECK_FALSE(busy_share("intr 5", "cpu 1 2 3 4").has_value());
  CHECK_FALSE(busy_share("cpu 1 2 3 4", "cpu 1 2 3 4").has_value());
}

TEST_CASE("busy machine warning: only above a quarter of the cores, with the share and the cores") {
  CHECK(busy_machine_warning(0.2, 2).empty());
  CHECK(busy_machine_warning(std::nullopt, 2).empty());
  const std::string w = busy_machine_warning(0.87, 2);
  CHECK(w.find("kept 87% of its 2 cores busy") != std::string::npos);
  CHECK(busy_machine_warning(0.5, 1).find("of its 1 core busy") != std::string::npos);
}

TEST_CASE("host load: this process's own time is not other work") {
  // 100 ticks passed, 40 of them not idle; this process ran 30 of those (a BLAS library's
  // workers spinning after their last call): other work kept 10%.
  const std::string before = "cpu  100 0 100 600 0 0 0 0 0 0\n";
  const std::string after = "cpu  130 0 110 660 0 0 0 0 0 0\n";
  CHECK(*busy_share(before, after) == approx(0.4));
  CHECK(*busy_share(before, after, 30) == approx(0.1));
  CHECK(*busy_share(before, after, 60) == approx(0.0));  // never below zero
  // /proc/self/stat: utime 1234 and stime 56 follow the state and ten more fields; a command
  // name with spaces and parentheses does not shift them.
  const std::string self = "4242 (perf sim (x)) S 1 4242 4242 0 -1 4194560 500 0 0 0 1234 56 0 0 20 0 3 0";
  CHECK(*process_ticks(self) == approx(1290));
  CHECK_FALSE(process_ticks("4242 perfsim S 1").has_value());
  CHECK_FALSE(process_ticks("4242 (perfsim) S 1 2").has_value());
}
