// ProgressLine (see progress.hpp).
#include "cli/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <utility>

namespace perfsim {

std::string eta_text(double elapsed, double fraction) {
  if (fraction <= 0 || fraction >= 1 || elapsed <= 0) return {};
  const double left = elapsed / fraction * (1 - fraction);
  if (left > 99) return fmt::format("ETA {:.0f} min", std::ceil(left / 60));
  return fmt::format("ETA {:.0f} s", std::ceil(left));
}

std::string progress_text(const std::string& what, const std::string& item, double elapsed, double fraction) {
  const std::string eta = eta_text(elapsed, fraction);
  return fmt::format("{}: {}  {:.1f} s{}", what, item, elapsed, eta.empty() ? "" : ", " + eta);
}

bool progress_enabled(bool quiet) { return !quiet && ::isatty(::fileno(stderr)) != 0; }

ProgressLine::ProgressLine(std::string what, bool enabled)
    : m_what(std::move(what)), m_enabled(enabled), m_start(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::update(const std::string& item, double fraction) {
  update(item, fraction, std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count());
}

void ProgressLine::update(const std::string& item, double fraction, double elapsed) {
  if (!m_enabled) return;
  // Carriage return and erase-line: the line redraws in place.
  fmt::print(stderr, "\r\033[K{}", progress_text(m_what, item, elapsed, fraction));
  std::fflush(stderr);
  m_drawn = true;
}

void ProgressLine::keep() {
  if (!m_drawn) return;
  fmt::print(stderr, "\n");
  std::fflush(stderr);
  m_drawn = false;
}

void ProgressLine::clear() {
  if (!m_drawn) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
  m_drawn = false;
}

}  // namespace perfsim
