// One stack step's graphs and their predictions, the same way whether the step is one GPU's
// graph or the rank graphs of a parallel layout: priced on the hardware the run is compared on
// and, as what-ifs, on the scenario's other hardware; and, when the step does not fit, the
// layouts or GPU counts that would.
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

#include "core/cost/cost_model.hpp"
#include "core/parallel/layout_prediction.hpp"
#include "core/parallel/plan.hpp"
#include "core/run/results.hpp"
#include "core/run/scenario.hpp"

namespace perfsim {

// The graphs of stack step `step` of a scenario: one GPU's graph, or one rank graph per pipeline
// stage of its layout. Holds references to the scenario and the stack, which must outlive it.
class StepGraphs {
 public:
  // Builds them for `layout`, the step's layout on the hardware it is compared on. Throws
  // ConfigError when a pass refuses the step.
  StepGraphs(const Scenario& s, const std::vector<StackStep>& stack, std::size_t step, ParallelSpec layout);

  // The step priced on `hw`, and its layout's prediction when it has a layout.
  struct Priced {
    Prediction prediction;
    std::optional<LayoutPrediction> layout;
  };
  [[nodiscard]] Priced price(const Hardware& hw) const;

  [[nodiscard]] const Scenario& scenario() const { return m_scenario; }
  [[nodiscard]] const std::vector<StackStep>& stack() const { return m_stack; }
  [[nodiscard]] std::size_t step() const { return m_step; }
  [[nodiscard]] const ParallelSpec& layout() const { return m_layout; }
  [[nodiscard]] const std::vector<RankGraph>& ranks() const { return m_ranks; }  // empty on one GPU
  // The step's graph (a layout's: rank 0's).
  [[nodiscard]] const Graph& graph() const;
  // The same, moved out: the last use of these graphs.
  [[nodiscard]] Graph take_graph();

 private:
  const Scenario& m_scenario;
  const std::vector<StackStep>& m_stack;
  std::size_t m_step;
  ParallelSpec m_layout;
  Graph m_graph;                   // one GPU
  std::vector<RankGraph> m_ranks;  // a layout
};

// Prices `graphs` on `primary` into r.predicted (and r.layout) and on each other hardware of the
// scenario into r.what_if (and r.what_if_layout). When the step does not fit `primary` and
// `search_fits`, searches what would: layouts of the same GPUs (r.layout->layouts_that_fit), or
// for one GPU the fewest GPUs that fit (r.fit_gpus, r.layouts_that_fit).
void predict_step(StepResult& r, const StepGraphs& graphs, const Hardware& primary, bool search_fits);

}  // namespace perfsim
