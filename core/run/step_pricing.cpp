// A stack step priced on the scenario's hardware, one GPU's graph and a layout's rank graphs
// alike, and the layout search behind "does not fit: fits on ...".
#include "core/run/step_pricing.hpp"

#include <algorithm>
#include <thread>
#include <utility>

#include "core/errors.hpp"
#include "core/parallel/search.hpp"

namespace perfsim {

StepGraphs::StepGraphs(const Scenario& s, const std::vector<StackStep>& stack, std::size_t step, ParallelSpec layout)
    : m_scenario(s), m_stack(stack), m_step(step), m_layout(std::move(layout)) {
  if (m_layout.parallel())
    m_ranks = build_rank_graphs(s.model, s.workload, stack, step, m_layout, s.execute.layers);
  else
    m_graph = build_stack_graph(s.model, s.workload, stack, step, BuildOptions::sampled(s.execute.layers));
}

StepGraphs::Priced StepGraphs::price(const Hardware& hw) const {
  if (m_ranks.empty()) return {predict(m_graph, hw), std::nullopt};
  LayoutPrediction lp;
  if (hw.gpus_per_node == m_layout.node_gpus) {
    lp = predict_layout(m_ranks, m_layout, hw);
  } else {
    // Nodes of another size shard hybrid_shard differently: that hardware's own ranks.
    ParallelSpec other = m_layout;
    other.node_gpus = hw.gpus_per_node;
    const Scenario& s = m_scenario;
    lp = predict_layout(build_rank_graphs(s.model, s.workload, m_stack, m_step, other, s.execute.layers), other, hw);
  }
  Prediction p = step_prediction(lp);
  return {std::move(p), std::move(lp)};
}

const Graph& StepGraphs::graph() const { return m_ranks.empty() ? m_graph : m_ranks.front().graph; }

Graph StepGraphs::take_graph() { return m_ranks.empty() ? std::move(m_graph) : std::move(m_ranks.front().graph); }

namespace {

// Layouts the step's layout names beside "does not fit": at most this many, each a different
// layout (its best micro-batch).
constexpr std::size_t fitting_layouts_shown = 3;

// The fitting layouts of `space`'s GPU count (at most fitting_layouts_shown, distinct), best
// first, found by the layout search over the step alone from `base`; nullopt when the space has
// no usable layout (no micro-batch divides the global batch).
std::optional<std::vector<FittingLayout>> fitting_layouts(const StepGraphs& graphs, const ParallelSpec& base,
                                                          const Hardware& hw, SearchSpace space) {
  const Scenario& s = graphs.scenario();
  // As many layers a stage as the step's own graphs (execute.layers, 2 by default), so a layout
  // named here prices as it would in a row of its own; at most 2 (0, all, is 1 here), to keep
  // the search cheap. A few threads: the search is small.
  space.layers = std::clamp<int64_t>(s.execute.layers, 1, 2);
  space.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1U, 4U));
  SearchResult found;
  try {
    found = search_layouts(s.model, s.workload, graphs.stack(), graphs.step(), base, hw, space);
  } catch (const ConfigError&) {
    return std::nullopt;
  }
  std::vector<FittingLayout> out;
  for (const SearchCandidate& c : found.layouts) {
    if (!c.fits || out.size() >= fitting_layouts_shown) break;
    const std::string name = describe(c.layout);
    if (std::any_of(out.begin(), out.end(), [&](const FittingLayout& f) { return describe(f.layout) == name; }))
      continue;
    out.push_back({c.layout, c.micro_batch, c.grad_accum, c.tokens_per_second_per_gpu});
  }
  return out;
}

// When the step's layout does not fit `hw`: the layouts of the same GPU count that fit (its
// passes, the search's default space, recompute as the stack has it; cp as the step has it),
// best predicted tokens/s first.
void find_layouts_that_fit(LayoutPrediction& lp, const StepGraphs& graphs, const Hardware& hw) {
  SearchSpace space;
  space.gpus = lp.layout.gpus();
  if (lp.layout.cp > 1) space.cp = {1, lp.layout.cp};
  if (auto found = fitting_layouts(graphs, lp.layout, hw, space)) {
    lp.fit_searched = true;
    lp.layouts_that_fit = std::move(*found);
  }
}

// When a one-GPU step does not fit `hw`: the fewest GPUs, doubling from 2 up to 1,024, some
// layout of which fits. Each GPU keeps the step's micro-batch (training: the global batch grows
// with the GPUs, as adding data-parallel replicas does); inference splits the step's batch. The
// layouts searched are the search's defaults at that micro-batch, one chunk a stage.
void find_gpus_that_fit(StepResult& r, const StepGraphs& graphs, const Hardware& hw) {
  constexpr int most_gpus = 1024;
  const Workload& built = graphs.graph().workload;
  r.fit_searched = true;
  for (int gpus = 2; gpus <= most_gpus; gpus *= 2) {
    SearchSpace space;
    space.gpus = gpus;
    space.interleave = {1};
    if (graphs.scenario().workload.phase == Phase::train) {
      space.micro_batches = {built.batch};
      space.global_batch = built.batch * built.grad_accum * gpus;
    }
    const std::optional<std::vector<FittingLayout>> found = fitting_layouts(graphs, ParallelSpec{}, hw, space);
    if (found && !found->empty()) {
      r.fit_gpus = gpus;
      r.layouts_that_fit = *found;
      return;
    }
  }
}

}  // namespace

void predict_step(StepResult& r, const StepGraphs& graphs, const Hardware& primary, bool search_fits) {
  StepGraphs::Priced priced = graphs.price(primary);
  r.predicted = std::move(priced.prediction);
  r.layout = std::move(priced.layout);
  if (!r.predicted.fits && search_fits) {
    // A layout's own GPUs may hold it laid out otherwise; one GPU (ZeRO on or not) needs more.
    if (r.layout && r.layout->gpus > 1)
      find_layouts_that_fit(*r.layout, graphs, primary);
    else
      find_gpus_that_fit(r, graphs, primary);
  }
  for (const Hardware& hw : graphs.scenario().hardware) {
    if (hw.name == primary.name) continue;
    priced = graphs.price(hw);
    r.what_if.push_back(std::move(priced.prediction));
    if (priced.layout) r.what_if_layout.push_back(std::move(*priced.layout));
  }
}

}  // namespace perfsim
