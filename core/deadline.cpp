#include "core/deadline.hpp"

#include <algorithm>
#include <atomic>
#include <limits>

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

DeadlineScope::~DeadlineScope() {
  g_at.store(m_prev_at);
  g_message.store(m_prev_message);
}

}  // namespace perfsim
