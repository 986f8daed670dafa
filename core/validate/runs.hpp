// Several validations of one suite priced with one profile (saved reports, `perfsim validate
// --measurements A --measurements B ...`): which per-op errors repeat in every run, the model's
// biases, and which come and go with the run, the noise of the measurement. docs/VALIDATION.md
// §4b defines the figures.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/graph/op_kind.hpp"
#include "core/validate/validation.hpp"

namespace perfsim {

// One op measured in every run: its signed error in each, in run order.
struct OpAcrossRuns {
  std::string scenario, step, op;
  OpKind kind = OpKind::gemm;
  std::vector<double> errors;
  [[nodiscard]] double mean() const;
};

struct RunsComparison {
  double op_error = 0;                  // the |error| threshold (fraction: 0.15 = 15%)
  std::size_t compared = 0;             // ops measured in every run (same scenario, step, name)
  std::vector<std::size_t> over;        // per run: its compared ops with |error| > op_error
  std::vector<OpAcrossRuns> every_run;  // over op_error in every run, largest |mean| first
  std::size_t some_runs = 0;            // over op_error in some runs but not all
  // (max − min) / median of each compared op's measured time over the runs.
  ErrorStats measured_spread;
};

// Needs two runs or more; op_error > 0.
[[nodiscard]] RunsComparison compare_runs(const std::vector<ValidationSummary>& runs, double op_error);

}  // namespace perfsim
