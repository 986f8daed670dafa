// Measurements saved by `perfsim validate --format json`, replayed as a Backend: the suite is
// priced again with another profile, or by a changed cost model, without the device
// (`perfsim validate --measurements FILE`). Every step answers with what was measured for it;
// ops are matched by name, and those the report did not compare come back not executed.
#pragma once
#include <map>
#include <string>
#include <utility>

#include "core/run/backend.hpp"
#include "core/validate/collectives.hpp"

namespace perfsim {

class ReplayBackend final : public Backend {
 public:
  // Reads a JSON validation report. Throws ConfigError naming the file and what is wrong when
  // it cannot be read or is not one.
  [[nodiscard]] static ReplayBackend from_file(const std::string& path);
  [[nodiscard]] static ReplayBackend from_json_text(const std::string& text, const std::string& path);

  // The run label (scenario name, plus "[sweep point]") whose steps run() answers next.
  void select(std::string scenario) { m_scenario = std::move(scenario); }
  [[nodiscard]] bool quick() const { return m_quick; }
  [[nodiscard]] std::size_t step_count() const { return m_steps.size(); }
  // The collectives the report timed (none, with the reason, in reports without them).
  [[nodiscard]] const CollectiveMeasurements& collectives() const { return m_collectives; }

  [[nodiscard]] std::string name() const override { return m_device.backend; }
  [[nodiscard]] DeviceInfo device() const override { return m_device; }
  [[nodiscard]] std::string unsupported_reason(const Op&, const Graph&) const override { return {}; }
  // The saved step of the selected scenario named by the graph's last applied step; throws
  // NotExecutable when the report holds no measurement of it.
  [[nodiscard]] Measurement run(const Graph& g, const RunOptions& o) override;

 private:
  struct SavedOp {
    double in_step = 0;  // measured_in_step_s: the op's median in its step
    double device = 0;   // measured_s: its held device time on eager steps
    double host = 0;     // measured_host_s (0: not in the report)
  };
  struct SavedStep {
    double step_time = 0;
    double peak_bytes = 0;
    int timed_runs = 0;     // 0: not in the report (older reports)
    std::string op_timing;  // "": not in the report
    std::map<std::string, SavedOp> ops;
  };
  DeviceInfo m_device;
  bool m_quick = false;
  bool m_held = false;  // the report compared eager ops by held device times (overall.held_ops)
  std::string m_path, m_scenario;
  std::map<std::pair<std::string, std::string>, SavedStep> m_steps;
  CollectiveMeasurements m_collectives;
};

}  // namespace perfsim
