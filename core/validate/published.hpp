// `perfsim validate --published`: scenarios that reproduce a published measurement (a paper's
// table row, a vendor's benchmark), predicted and compared with the published figure. Each
// case is an ordinary scenario with a `published = {...}` field (core/run/scenario.hpp); its
// last stack step is the configuration that was measured. docs/FIDELITY.md lists the sources.
#pragma once
#include <string>
#include <vector>

#include "core/run/results.hpp"
#include "core/run/scenario.hpp"

namespace perfsim {

struct PublishedCase {
  std::string file;
  std::string scenario;
  std::string step;        // the stack step compared (the last)
  std::string hardware;    // what the prediction was priced on
  std::string profile;     // "datasheet, uncalibrated" or "calibrated on ..."
  PublishedFigure published;
  double predicted = 0;    // in the metric's unit
  // The prediction's error as the implied time's: (predicted − published) / published for a
  // time, published / predicted − 1 for a rate. Negative: perfsim predicts faster than measured.
  double error = 0;
};

struct PublishedSource {
  std::string source, citation, url;
  int cases = 0;
  double mean_abs_error = 0;
  double max_abs_error = 0;
  std::string worst;       // the case of max_abs_error
};

struct PublishedSummary {
  std::vector<PublishedCase> cases;      // in suite order
  std::vector<PublishedSource> sources;  // in order of first appearance
  double mean_abs_error = 0;             // over every case
  double max_abs_error = 0;
};

// The figure `metric` of a run's last stack step, as predicted. Throws ConfigError when the
// run does not have it (a serving metric of a training scenario, a step that predicted nothing).
[[nodiscard]] double predicted_figure(const RunResult& r, const std::string& metric);

// The case of one scenario that carries `published`, from its prediction-only run.
[[nodiscard]] PublishedCase published_case(const RunResult& r, const PublishedFigure& published,
                                           const std::string& hardware, const std::string& profile);

[[nodiscard]] PublishedSummary summarize_published(std::vector<PublishedCase> cases);

}  // namespace perfsim
