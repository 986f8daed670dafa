// `perfsim calibrate`: measure this machine with microbenchmark sweeps and write a profile.
#pragma once
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace perfsim {

struct CalibrateArgs {
  std::string backend = "auto";  // auto | cpu | cuda
  bool quick = false;            // coarser grids, fewer calibration graphs
  std::string output;            // -o FILE (required)
  std::string points;            // --points FILE: the measurements behind the fit, CSV
  std::string name;              // profile name; empty: "<catalog>-local"
  std::string module_path;       // where the device's catalog entry is looked up
  bool quiet = false;            // no progress lines on stderr
  // --merge FILE...: fit again from saved points (no device); --profile: the profile they refine
  std::vector<std::string> merge;
  std::string profile;
};

// Registers the command's options on `cmd`, filling `a` when parsed.
void add_calibrate_options(CLI::App& cmd, CalibrateArgs& a);

[[nodiscard]] int cmd_calibrate(const CalibrateArgs& a);

}  // namespace perfsim
