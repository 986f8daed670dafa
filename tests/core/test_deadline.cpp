// Deadlines for long work (core/deadline.hpp) and the large stack scripts run on
// (core/large_stack.hpp).
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/deadline.hpp"
#include "core/large_stack.hpp"

using namespace perfsim;

TEST_CASE("deadline: no scope, no limit; a passed deadline throws its message; scopes nest, the earliest rules") {
  CHECK_NOTHROW(check_deadline());
  CHECK_FALSE(deadline_passed());
  {
    const DeadlineScope outer(3600, "outer");
    CHECK_NOTHROW(check_deadline());
    {
      const DeadlineScope inner(0.001, "inner passed");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      CHECK(deadline_passed());
      CHECK_THROWS_WITH_AS(check_deadline(), "inner passed", TimeLimitError);
      {
        // A later deadline inside an earlier one changes nothing.
        const DeadlineScope later(3600, "later");
        CHECK_THROWS_WITH_AS(check_deadline(), "inner passed", TimeLimitError);
      }
    }
    CHECK_NOTHROW(check_deadline());  // the outer one is back
  }
  // seconds <= 0: no deadline.
  const DeadlineScope none(0, "never");
  CHECK_NOTHROW(check_deadline());
}

TEST_CASE("deadline: a hard stop that is not reached does nothing") {
  HardStop hard;
  hard.grace_s = 30;
  hard.message = [] { return std::string("should not print"); };
  const DeadlineScope scope(0.001, "soft", std::move(hard));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK_THROWS_AS(check_deadline(), TimeLimitError);
  // Leaving the scope stops its watchdog long before the hard stop.
}

namespace {

// About 1 KiB of stack per level that the optimizer cannot drop; returns the depth reached.
int deep(int n) {
  volatile char pad[1024];
  pad[0] = 1;
  if (n == 0) return 0;
  return deep(n - 1) + pad[0];
}

}  // namespace

TEST_CASE("large stack: recursion far beyond a default 8 MiB stack; results and exceptions come back") {
  // 64 Ki levels of 1 KiB: 64 MiB, eight default stacks.
  CHECK(on_large_stack([] { return deep(1 << 16); }) == 1 << 16);
  CHECK_THROWS_WITH_AS(on_large_stack([]() -> int { throw std::runtime_error("from the thread"); }), "from the thread",
                       std::runtime_error);
  // Nested: runs in place, on the same thread.
  const auto outer = on_large_stack([] {
    const auto here = std::this_thread::get_id();
    return on_large_stack([&] { return std::this_thread::get_id() == here; });
  });
  CHECK(outer);
}
