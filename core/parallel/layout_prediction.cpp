// predict_layout: each rank priced by predict(); a pipeline's stages joined by the simulated
// schedule (see layout_prediction.hpp).
#include "core/parallel/layout_prediction.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/builders/streams.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

// A send/recv at a stage's edge. Ring attention (context parallelism) sends too, on its own
// stream: those are the rank's own communication, not the pipeline's.
bool is_pipeline_transfer(const Op& op) {
  return op.kind == OpKind::collective && op.attrs.collective == Collective::send_recv &&
         is_pipeline_stream(op.stream);
}

// A send/recv that is no pipeline transfer: ring attention's.
bool is_other_send_recv(const Op& op) {
  return op.kind == OpKind::collective && op.attrs.collective == Collective::send_recv && !is_pipeline_transfer(op);
}

// Bytes of the forward activations backward reads: what each micro-batch in flight holds, for
// every layer of the stage (Tensor::count) or, `as_built`, for the layers its graph holds.
double saved_activation_bytes(const Graph& g, bool as_built) {
  std::vector<Stage> writer(g.tensors.size(), Stage::other);
  std::vector<bool> read_in_backward(g.tensors.size(), false);
  for (const Op& op : g.ops) {
    for (int id : op.outputs) writer[static_cast<std::size_t>(id)] = op.stage;
    if (op.stage == Stage::backward)
      for (int id : op.inputs) read_in_backward[static_cast<std::size_t>(id)] = true;
  }
  double bytes = 0;
  for (const Tensor& t : g.tensors) {
    const auto k = static_cast<std::size_t>(t.id);
    if (t.role == TensorRole::activation && !t.on_host() && writer[k] == Stage::forward && read_in_backward[k])
      bytes += t.bytes() * (as_built ? 1.0 : t.count);
  }
  return bytes;
}

// Seconds of one micro-batch's forward and backward on stream 0 (compute and the blocking
// tensor-parallel collectives); side streams overlap them.
void pass_times(const Graph& g, const Prediction& p, int micro_batches, RankPrediction& r) {
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.stream != 0 || is_pipeline_transfer(op)) continue;
    const double seconds = p.ops[i].time * op.count / micro_batches;
    if (op.stage == Stage::forward) r.forward += seconds;
    if (op.stage == Stage::backward) r.backward += seconds;
  }
}

// One transfer between neighbouring stages, as the graph prices it.
double transfer_seconds(const Graph& g, const Prediction& p) {
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (is_pipeline_transfer(g.ops[i])) return p.ops[i].time;
  return 0;
}

double rank_makespan(const Graph& g, const std::vector<OpCost>& ops, const Hardware& hw) {
  return timeline_makespan(g, ops, hw.kind == "gpu", hw.collective_sm_share());
}

// What the rank's timeline (of `makespan`) loses to the ops `free` selects: its makespan less
// the makespan with their times and launches set to 0.
template <class Free>
double exposed_seconds(const Graph& g, const Prediction& p, const Hardware& hw, double makespan, Free free) {
  std::vector<OpCost> without = p.ops;
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (free(g.ops[i])) {
      without[i].time = 0;
      without[i].launch_time = 0;
    }
  return makespan - rank_makespan(g, without, hw);
}

// Per collective kind on one rank: its seconds and what the rank's timeline loses to it.
std::map<Collective, CommunicationFigures> communication_by_kind(const Graph& g, const Prediction& p,
                                                                 const Hardware& hw) {
  std::map<Collective, CommunicationFigures> out;
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == OpKind::collective) out[g.ops[i].attrs.collective].total += p.ops[i].time * g.ops[i].count;
  if (out.empty()) return out;
  const double makespan = rank_makespan(g, p.ops, hw);
  for (auto& [kind, figures] : out)
    figures.exposed = exposed_seconds(g, p, hw, makespan, [kind = kind](const Op& op) {
      return op.kind == OpKind::collective && op.attrs.collective == kind;
    });
  return out;
}

// The rank's timeline (its step time less the host's part) with its pipeline transfers free.
double without_transfers(const Graph& g, const Prediction& p, const Hardware& hw) {
  const double makespan = rank_makespan(g, p.ops, hw);
  return p.step_time - exposed_seconds(g, p, hw, makespan, is_pipeline_transfer);
}

struct PipelineStep {
  double step = 0;
  double bubble_fraction = 0;
};

// The pipeline's step: every stage's passes scheduled, then each stage's work after them.
PipelineStep schedule_step(const ParallelSpec& layout, int m, std::vector<RankPrediction>& ranks,
                           double send, bool record) {
  const int p = layout.pp, v = layout.interleave;
  PipelineTimes t;
  t.forward.assign(static_cast<std::size_t>(p), {});
  t.backward.assign(static_cast<std::size_t>(p), {});
  for (int s = 0; s < p; ++s) {
    // A stage's chunks are equal shares of its layers.
    const RankPrediction& r = ranks[static_cast<std::size_t>(s)];
    t.forward[static_cast<std::size_t>(s)].assign(static_cast<std::size_t>(v), r.forward / v);
    t.backward[static_cast<std::size_t>(s)].assign(static_cast<std::size_t>(v), r.backward / v);
  }
  t.send_forward = t.send_backward = send;
  const PipelineRun run = simulate_pipeline(layout.pipeline_schedule(), p, m, v, t, true);
  std::vector<double> finish(static_cast<std::size_t>(p), 0.0);
  for (const PipelineEvent& e : run.events)
    finish[static_cast<std::size_t>(e.stage)] = std::max(finish[static_cast<std::size_t>(e.stage)], e.end);
  PipelineStep out;
  out.bubble_fraction = run.bubble_fraction;
  for (int s = 0; s < p; ++s) {
    RankPrediction& r = ranks[static_cast<std::size_t>(s)];
    if (record) {
      r.finish = finish[static_cast<std::size_t>(s)];
      r.in_flight = std::max(1.0, static_cast<double>(run.peak_in_flight[static_cast<std::size_t>(s)]) / v);
    }
    out.step = std::max(out.step, finish[static_cast<std::size_t>(s)] + r.after_pipeline);
  }
  return out;
}

}  // namespace

Prediction step_prediction(const LayoutPrediction& lp) {
  Prediction p = lp.ranks.front().prediction;
  const RankPrediction& worst = lp.ranks[static_cast<std::size_t>(lp.worst_rank)];
  p.step_time = lp.step_time;
  p.mfu = lp.mfu;
  p.hfu = lp.hfu;
  // Every GPU's: a stage's ranks are alike, gpus / pp of them.
  p.model_flops = 0;
  for (const RankPrediction& r : lp.ranks)
    p.model_flops += r.prediction.model_flops * lp.gpus / std::max(1, lp.layout.pp);
  p.communication_time = lp.communication_time;
  p.exposed_communication = lp.exposed_communication;
  p.memory = worst.prediction.memory;
  p.memory.by_role[TensorRole::activation] += lp.memory_peak - p.memory.peak;
  p.memory.peak = lp.memory_peak;
  p.memory_executed = worst.prediction.memory_executed;
  p.memory_executed.by_role[TensorRole::activation] += worst.memory_executed_peak - p.memory_executed.peak;
  p.memory_executed.peak = worst.memory_executed_peak;
  p.fits = lp.fits;
  return p;
}

LayoutPrediction predict_layout(const std::vector<RankGraph>& graphs, const ParallelSpec& layout,
                                const Hardware& hw) {
  LayoutPrediction out;
  out.layout = layout;
  out.gpus = layout.gpus();
  const Workload& w = graphs.front().graph.workload;
  const bool train = w.phase == Phase::train;
  out.micro_batches = train ? static_cast<int>(w.grad_accum) : 1;
  const int m = out.micro_batches;

  for (const RankGraph& rg : graphs) {
    RankPrediction r;
    r.stage = rg.stage;
    r.layers = rg.graph.layers_total;  // a stage's graph is a model of its own layers
    r.prediction = predict(rg.graph, hw);
    pass_times(rg.graph, r.prediction, m, r);
    // The rank's own timeline less its passes, without its pipeline transfers: the schedule's
    // simulation prices those (a receive that waits for the neighbour), every chunk's.
    r.after_pipeline = std::max(0.0, without_transfers(rg.graph, r.prediction, hw) - m * (r.forward + r.backward));
    // The graph holds one micro-batch's activations whatever grad_accum says.
    r.saved_per_micro_batch = train ? saved_activation_bytes(rg.graph, false) : 0.0;
    r.saved_executed_per_micro_batch = train ? saved_activation_bytes(rg.graph, true) : 0.0;
    out.ranks.push_back(std::move(r));
  }

  // Without a pipeline the rank's own timeline is the step.
  double send = 0;
  if (layout.pp == 1) {
    out.step_time = out.ranks.front().prediction.step_time;
  } else {
    send = transfer_seconds(graphs.front().graph, out.ranks.front().prediction);
    out.transfer_time = send;
    if (train) {
      const PipelineStep step = schedule_step(layout, m, out.ranks, send, true);
      out.step_time = step.step;
      out.bubble_fraction = step.bubble_fraction;
    } else {
      // Inference sends one batch through the stages in turn.
      double busiest = 0;
      for (RankPrediction& r : out.ranks) {
        r.finish = out.step_time + r.forward;
        out.step_time = r.finish + send;
        busiest = std::max(busiest, r.forward);
      }
      out.step_time -= send;
      double extra = 0;
      for (const RankPrediction& r : out.ranks) extra = std::max(extra, r.after_pipeline);
      out.step_time += extra;
      // No micro-batches overlap the stages: while the batch is on the others a stage idles.
      // The bubble is the busiest stage's idle share, (step − its forward) / step: (p − 1)/p
      // for p equal stages and free sends.
      if (out.step_time > 0) out.bubble_fraction = (out.step_time - busiest) / out.step_time;
    }
  }

  // Communication by kind on the stage that communicates most.
  const RankPrediction* loudest = &out.ranks.front();
  for (const RankPrediction& r : out.ranks)
    if (r.prediction.communication_time > loudest->prediction.communication_time) loudest = &r;
  const Graph& lg = graphs[static_cast<std::size_t>(loudest - out.ranks.data())].graph;
  out.communication = communication_by_kind(lg, loudest->prediction, hw);
  out.communication_time = loudest->prediction.communication_time;
  out.exposed_communication = loudest->prediction.exposed_communication;
  if (layout.pp > 1 && train && send > 0) {
    // Transfers delay the receiving stage only: what they cost is the schedule's difference.
    // Other send/recvs (ring attention) stay what the rank's own timeline loses to them.
    std::vector<RankPrediction> copy = out.ranks;
    const double free_step = schedule_step(layout, m, copy, 0.0, false).step;
    double ring = 0;
    if (std::any_of(lg.ops.begin(), lg.ops.end(), is_other_send_recv))
      ring = exposed_seconds(lg, loudest->prediction, hw, rank_makespan(lg, loudest->prediction.ops, hw),
                             is_other_send_recv);
    out.communication[Collective::send_recv].exposed = ring + std::max(0.0, out.step_time - free_step);
  }

  // Memory per rank: its peak with one micro-batch, plus the others in flight.
  for (RankPrediction& r : out.ranks) {
    r.memory_peak = r.prediction.memory.peak + (r.in_flight - 1) * r.saved_per_micro_batch;
    r.memory_executed_peak =
        r.prediction.memory_executed.peak + (r.in_flight - 1) * r.saved_executed_per_micro_batch;
    r.fits = hw.memory_bytes <= 0 || r.memory_peak <= hw.memory_bytes;
  }
  out.memory_min = out.ranks.front().memory_peak;
  for (std::size_t s = 0; s < out.ranks.size(); ++s) {
    const RankPrediction& r = out.ranks[s];
    if (r.memory_peak > out.memory_peak) {
      out.memory_peak = r.memory_peak;
      out.worst_rank = static_cast<int>(s);
    }
    out.memory_min = std::min(out.memory_min, r.memory_peak);
    out.fits = out.fits && r.fits;
  }
  if (!out.fits)
    out.does_not_fit = fmt::format("{}needs {} of {}", layout.pp > 1 ? fmt::format("stage {} ", out.worst_rank) : "",
                                   format_bytes(out.memory_peak), format_bytes(hw.memory_bytes));

  // Throughput and utilisation of every GPU.
  out.tokens_per_step = w.tokens_per_step() * layout.dp;
  if (out.step_time > 0) {
    out.tokens_per_second = out.tokens_per_step / out.step_time;
    out.tokens_per_second_per_gpu = out.tokens_per_second / out.gpus;
    double mfu = 0, hfu = 0;
    for (const RankPrediction& r : out.ranks) {
      mfu += r.prediction.mfu * r.prediction.step_time;
      hfu += r.prediction.hfu * r.prediction.step_time;
    }
    out.mfu = mfu / static_cast<double>(out.ranks.size()) / out.step_time;
    out.hfu = hfu / static_cast<double>(out.ranks.size()) / out.step_time;
  }
  return out;
}

}  // namespace perfsim
