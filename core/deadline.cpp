#include "core/deadline.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <thread>

#include "core/files.hpp"

namespace perfsim {

namespace {

using Clock = std::chrono::steady_clock;

constexpr long long none = std::numeric_limits<long long>::max();
// The earliest deadline in force (steady clock ticks) and its message; `none` when no scope
// sets one.
std::atomic<long long> g_at{none};
std::atomic<const std::string*> g_message{nullptr};

long long ticks(Clock::time_point t) { return t.time_since_epoch().count(); }

}  // namespace

bool deadline_passed() {
  const long long at = g_at.load(std::memory_order_relaxed);
  return at != none && ticks(Clock::now()) > at;
}

void check_deadline() {
  if (!deadline_passed()) return;
  const std::string* message = g_message.load();
  throw TimeLimitError(message != nullptr ? *message : "the time limit passed");
}

DeadlineScope::DeadlineScope(Clock::time_point at, std::string message)
    : m_prev_at(g_at.load()), m_prev_message(g_message.load()), m_message(std::move(message)) {
  if (ticks(at) < m_prev_at) {
    g_message.store(&m_message);
    g_at.store(ticks(at));
  }
}

DeadlineScope::DeadlineScope(double seconds, std::string message)
    : DeadlineScope(seconds > 0 ? Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(std::min(seconds, 1e9)))
                                : Clock::time_point::max(),
                    std::move(message)) {}

struct DeadlineScope::Watchdog {
  std::mutex mutex;
  std::condition_variable wake;
  bool done = false;
  std::thread thread;

  Watchdog(Clock::time_point at, HardStop hard) {
    thread = std::thread([this, at, hard = std::move(hard)] {
      std::unique_lock<std::mutex> lock(mutex);
      if (wake.wait_until(lock, at, [this] { return done; })) return;
      const std::string message = "perfsim: error: " + (hard.message ? hard.message() : "the time limit passed") + "\n";
      std::fputs(message.c_str(), stderr);
      std::fflush(stderr);
      remove_temporary_files();
      std::_Exit(1);
    });
  }
  ~Watchdog() {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      done = true;
    }
    wake.notify_all();
    thread.join();
  }
};

DeadlineScope::DeadlineScope(double seconds, std::string message, HardStop hard)
    : DeadlineScope(seconds, std::move(message)) {
  if (!(seconds > 0) || !(hard.grace_s > 0)) return;
  const auto at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(std::min(seconds + hard.grace_s, 1e9)));
  m_watchdog = std::make_unique<Watchdog>(at, std::move(hard));
}

DeadlineScope::~DeadlineScope() {
  m_watchdog.reset();
  g_at.store(m_prev_at);
  g_message.store(m_prev_message);
}

}  // namespace perfsim
