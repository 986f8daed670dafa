// The progress line's text: the time left by the mean rate so far, none before any work is done
// or after all of it, minutes past 99 seconds.
#include <doctest/doctest.h>

#include "cli/progress.hpp"

using namespace perfsim;

TEST_CASE("progress: ETA by the mean rate so far") {
  CHECK(eta_text(10, 0.25) == "ETA 30 s");    // a quarter in 10 s: 30 s more
  CHECK(eta_text(3, 0.5) == "ETA 3 s");
  CHECK(eta_text(2.5, 0.5) == "ETA 3 s");     // rounded up: never promises less
  CHECK(eta_text(60, 0.25) == "ETA 3 min");   // 180 s
  CHECK(eta_text(10, 0).empty());
  CHECK(eta_text(10, 1).empty());
  CHECK(eta_text(0, 0.5).empty());
  CHECK(progress_text("run", "[2/4] +bf16", 1.25, 0.25) == "run: [2/4] +bf16  1.2 s, ETA 4 s");
  CHECK(progress_text("validate", "[1/5] a.lua", 0, 0) == "validate: [1/5] a.lua  0.0 s");
}

TEST_CASE("progress: a line that is not enabled writes nothing") {
  ProgressLine line("run", false);
  CHECK_FALSE(line.enabled());
  line.update("[1/2] x", 0.5);  // would draw on stderr; disabled it must not
  line.clear();
}
