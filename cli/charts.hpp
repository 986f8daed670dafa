// Charts of a JSON report or trace (perfsim plot, and --plots on run and validate): the embedded
// matplotlib script run over the report, every chart written to a directory as SVG and PNG.
#pragma once
#include <string>

namespace perfsim {

struct ChartOptions {
  std::string step;     // --step NAME: the step the per-step charts (and a trace's timeline) show; empty: each chart's own
  int point = 1;        // --point N: the sweep point (1-based) the per-step charts show
  int dpi = 100;        // PNG resolution
  bool quiet = false;   // no notes on stderr (skipped charts, what was written)
  std::string label;    // how messages name the report; empty: its path
  std::string trace;    // a trace of the same run (--trace FILE): the report's timeline chart comes from it
};

// Creates DIR when missing and throws ConfigError unless charts can be written there: checked
// before a run, so a bad --plots fails before the work.
void check_chart_dir(const std::string& dir);

// Throws ConfigError with what to install unless python3 with matplotlib can be started.
void check_chart_tools();

// Draws the charts of the JSON report in file `report` into `dir` (created when missing): the
// complete set or nothing; of a trace (--trace), the timeline. Throws ConfigError for a file that
// is no perfsim JSON report or trace, a
// directory that cannot be made, a missing python3 or matplotlib. Returns false when the
// script failed after saying why on stderr.
[[nodiscard]] bool draw_charts(const std::string& report, const std::string& dir, const ChartOptions& o);

// The same for a report held in memory (run and validate with --plots).
[[nodiscard]] bool draw_charts_of(const std::string& json_text, const std::string& dir, const ChartOptions& o);

}  // namespace perfsim
