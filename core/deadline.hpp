// A time limit on long work. Whoever starts the work (a script under --timeout, a run under
// --time-limit) sets a deadline for its extent; the loops that can run long (engine steps of a
// serving simulation, stack steps, sweep points, layouts searched, executed repeats) call
// check_deadline(), which throws TimeLimitError once the deadline has passed. A stop is
// cooperative: work between two checks finishes first.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace perfsim {

// The message says which limit was passed and what to change ("script ran longer than
// --timeout 60 s ...").
struct TimeLimitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws TimeLimitError with the message of the deadline that passed; cheap (a clock read).
void check_deadline();

// True once the earliest deadline in force has passed.
[[nodiscard]] bool deadline_passed();

// What happens when work overruns its deadline by `grace_s` without reaching a check (a loop
// inside a library call, such as a backtracking string.find, or an error handler): the process
// prints "perfsim: error: " + message() on one line, removes its temporary files and exits
// with status 1. Nothing else can stop such work.
struct HardStop {
  double grace_s = 0;  // 0: no hard stop
  std::function<std::string()> message;
};

// Puts a deadline in force for its lifetime. Scopes nest; the earliest deadline in force
// rules. Create and destroy scopes on one thread (the checks may run on any).
class DeadlineScope {
 public:
  DeadlineScope(std::chrono::steady_clock::time_point at, std::string message);
  // `seconds` from now; seconds <= 0 puts no deadline in force.
  DeadlineScope(double seconds, std::string message);
  // With a hard stop `hard.grace_s` after the deadline (a watchdog thread while the scope lives).
  DeadlineScope(double seconds, std::string message, HardStop hard);
  ~DeadlineScope();
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;

 private:
  long long m_prev_at;
  const std::string* m_prev_message;
  std::string m_message;
  struct Watchdog;
  std::unique_ptr<Watchdog> m_watchdog;
};

}  // namespace perfsim
