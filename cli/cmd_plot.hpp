// `perfsim plot REPORT.json DIR`: charts of a saved JSON report (or the timeline of a trace), as SVG and PNG.
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace perfsim {

struct PlotArgs {
  std::string report;    // a JSON report of perfsim run or perfsim validate, or a trace (--trace)
  std::string dir;       // where the charts go (created when missing)
  std::string step;      // --step NAME: the step of the roofline, per-rank and timeline charts
  int point = 1;         // --point N: the sweep point of the per-step charts
  int dpi = 100;         // --dpi: PNG resolution
  bool quiet = false;
};

// Registers the command's arguments and options on `cmd`, filling `a` when parsed.
void add_plot_options(CLI::App& cmd, PlotArgs& a);

[[nodiscard]] int cmd_plot(const PlotArgs& a);

}  // namespace perfsim
