// How many timed runs a step gets, the same way for every backend: at least `repeats`, then
// more until the timed runs have lasted `min_time` seconds of wall clock. A median of 10 runs
// of a step of a few hundred µs leaves the medians of its µs-long kernels to scatter by ±30%
// from one process to the next; a fixed time gives short steps many runs and long ones none
// extra.
#pragma once
#include <algorithm>
#include <chrono>

#include "core/deadline.hpp"

namespace perfsim {

// A safeguard only: steps of 200 µs or more reach a min_time of 0.2 s first.
constexpr int max_timed_runs = 1000;

class TimedRuns {
 public:
  TimedRuns(int repeats, double min_time_seconds)
      : m_repeats(std::max(1, repeats)), m_min_time(min_time_seconds), m_cap(std::max(m_repeats, max_timed_runs)) {}

  // Whether another timed run is due; call once before each run (the first call starts the clock).
  // A run past its time limit (--run-timeout, a script's --timeout) stops here (core/deadline.hpp).
  bool next() {
    check_deadline();
    if (m_done == 0) m_start = std::chrono::steady_clock::now();
    const bool due = m_done < m_repeats || (m_done < m_cap && elapsed() < m_min_time);
    if (due) ++m_done;
    return due;
  }
  // Runs started so far.
  [[nodiscard]] int count() const { return m_done; }

 private:
  [[nodiscard]] double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
  }

  int m_repeats;
  double m_min_time;
  int m_cap;
  int m_done = 0;
  std::chrono::steady_clock::time_point m_start{};
};

}  // namespace perfsim
