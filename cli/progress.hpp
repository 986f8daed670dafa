// One updating progress line on stderr for long work (executing a stack, validating a suite,
// calibrating): what is running, item k of n, the time so far and the estimated time left. Only
// on a terminal: piped or with --quiet it writes nothing, so logs and reports stay clean.
#pragma once
#include <chrono>
#include <string>

namespace perfsim {

// "ETA 25 s" for `fraction` of the work done after `elapsed` seconds (by the mean rate so far);
// empty before any is done or once it all is. Minutes above 99 s ("ETA 3 min").
[[nodiscard]] std::string eta_text(double elapsed, double fraction);

// The line itself: "validate: [2/9] data_parallel.lua · [1/4] DDP  12.3 s, ETA 41 s".
[[nodiscard]] std::string progress_text(const std::string& what, const std::string& item, double elapsed,
                                        double fraction);

class ProgressLine {
 public:
  // Draws only when `enabled` (stderr a terminal and not quiet): see progress_enabled().
  ProgressLine(std::string what, bool enabled);
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine();  // clears the line

  // Now at `item`, with `fraction` (0..1) of the whole done; the time is the line's own (since
  // it was made), or `elapsed` seconds when the work keeps its own clock (a calibration sweep).
  void update(const std::string& item, double fraction);
  void update(const std::string& item, double fraction, double elapsed);
  // Erases the line (before other output, and at the end).
  void clear();
  // Leaves the line on screen as it stands (a finished part's), the next update below it.
  void keep();
  [[nodiscard]] bool enabled() const { return m_enabled; }

 private:
  std::string m_what;
  bool m_enabled = false;
  bool m_drawn = false;
  std::chrono::steady_clock::time_point m_start;
};

// Whether a progress line shows: stderr is a terminal and the user did not ask for quiet.
[[nodiscard]] bool progress_enabled(bool quiet);

}  // namespace perfsim
