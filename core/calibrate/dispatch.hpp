// The eager launch path of a profile from calibration graphs timed both replayed and eager:
// how long the host takes to issue each kind of op (Hardware::dispatch_by_kind: the median of
// the host time the backend measured issuing ops of that kind) and the device's costs of an
// eager launch: on every kernel (launch_eager − launch_graph, from ops timed behind a held
// stream where the backend has them) and, on a kernel the device waits for, its latency
// (launch_wait), fitted through the cost model's own host-paced timeline (host_paced_waits)
// so that it reproduces the eager measurements.
#pragma once
#include <map>
#include <vector>

#include "core/graph/graph.hpp"
#include "core/graph/op_kind.hpp"

namespace perfsim {

// One graph measured both ways (per-op medians, one op not × count).
struct EagerCase {
  Graph graph;
  std::vector<double> graph_medians;  // replayed from a CUDA graph: kernels + launch_graph each
  std::vector<double> eager_medians;  // launched eagerly: kernel + launch + waits for the host
  std::vector<double> host_medians;   // host seconds issuing each op eagerly (0: not measured)
  std::vector<double> held_medians;   // launched eagerly behind a held stream: kernels + launch each
                                      // (OpMeasurement::device; empty or 0: not measured)
};

struct DispatchFit {
  double launch_eager = 0;              // launch_graph + the device's extra cost per eager kernel
  double launch_wait = 0;               // and more on a kernel the device waited for
  double dispatch_eager = 0;            // the median of by_kind: kinds never measured
  // Host seconds per kernel an op of each kind launches, keyed by calibration_family (a paged
  // or varlen op counts with its dense kind).
  std::map<OpKind, double> by_kind;
  std::map<OpKind, double> fixed_by_kind;  // host seconds per op on top (kinds fitted by a line)
  double step_error = 0;                // median |relative error| of the cases' eager steps
};

// dispatch per kind: the median measured host time of its ops per kernel they launch
// (kernel_launches; kinds without one: none). Kinds whose ops were seen launching different
// numbers of kernels get a line instead, host = fixed + per_kernel × launches (fit_line, both
// terms positive; else the median).
// The two launch costs. Where the cases hold held medians, each is fitted on what shows it:
// the extra cost on every kernel minimises the summed |log((graph median + extra) / held
// median)| of every op timed held (the device alone, ops queued back to back); then the
// latency, with that extra fixed, minimises the objective below. Without held medians, the
// pair of candidates minimising the objective: the summed |log(predicted / measured)| of
// every op plus, weighted by its op count, of every case's step (Σ per-op × count), where
// predicted = graph median + the extra cost + the host wait of the paced timeline run with
// that latency. Throws std::invalid_argument without an op measured both ways.
[[nodiscard]] DispatchFit fit_dispatch(const std::vector<EagerCase>& cases, double launch_graph);

}  // namespace perfsim
