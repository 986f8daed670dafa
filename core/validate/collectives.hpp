// Collectives in `perfsim validate`: every collective over groups of 2, 4, … of the backend's
// GPUs, timed as calibrate times them at buffer sizes between the calibration plan's, against
// the cost model's collective_time(). docs/VALIDATION.md defines the figures.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/graph/op_kind.hpp"

namespace perfsim {

class Backend;
struct RunResult;
struct ValidationSummary;

// One timed collective: the median seconds of back-to-back calls over `group` GPUs of a
// `payload`-byte buffer (the nccl-tests size, the payload collective_time() prices).
struct CollectiveMeasurement {
  Collective collective = Collective::all_reduce;
  int group = 2;
  double payload = 0;
  double seconds = 0;
};

struct CollectiveMeasurements {
  std::vector<CollectiveMeasurement> points;
  std::string skipped;  // why nothing (or not everything) was timed; "" when all was
};

// The buffer sizes validated: three times each size of the full calibration plan (8 KiB to
// 256 MiB in steps of 8x), so that none is a calibration point of either plan, and a fitted
// profile is read between its points (and, from a quick profile, past its largest).
[[nodiscard]] std::vector<double> collective_validation_payloads();

// Times every collective over groups 2, 4, … up to the backend's GPU count at
// collective_validation_payloads(). With fewer than 2 GPUs, or a backend that cannot time
// collectives, returns no points and says why. `progress` gets a line per collective and group.
[[nodiscard]] CollectiveMeasurements measure_collectives(Backend& backend,
                                                         const std::function<void(const std::string&)>& progress);

// Prices `m` with `hw` and adds the errors to `s` (collective_errors, collectives,
// all_collectives, collectives_skipped).
void add_collective_errors(ValidationSummary& s, const CollectiveMeasurements& m, const Hardware& hw);

// The collectives the steps of `runs` executed on ranks, each op's predicted time against its
// measured median (rank 0's), added to `s` as add_collective_errors adds timed ones. Pipeline
// transfers are left out: a receive waits for the other stage, so its time is the bubble, which
// the step time compares.
void add_step_collective_errors(ValidationSummary& s, const std::vector<RunResult>& runs);

}  // namespace perfsim
