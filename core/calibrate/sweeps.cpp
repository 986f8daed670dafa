// The measuring half of `perfsim calibrate`: each sweep builds its graphs, runs them on the
// backend and passes the per-op medians to the fit. A graph the backend cannot run is
// skipped and counted, never fatal: the profile keeps datasheet figures where nothing ran.
#include "core/calibrate/sweeps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "core/calibrate/graphs.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/roofline.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/passes/passes.hpp"
#include "core/units.hpp"

namespace perfsim {

SweepClock::SweepClock(const SweepContext& ctx, std::string sweep, int total)
    : m_ctx(ctx), m_sweep(std::move(sweep)), m_total(total), m_start(std::chrono::steady_clock::now()) {
  if (m_ctx.progress) m_ctx.progress({m_sweep, 0, m_total, 0.0});
}

void SweepClock::step() {
  ++m_done;
  if (m_ctx.progress) m_ctx.progress({m_sweep, m_done, m_total, seconds()});
}

double SweepClock::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
}

namespace {

// One figure of every op (0 where the op did not execute): median, host or device.
std::vector<double> per_op(const Measurement& m, double OpMeasurement::*figure) {
  std::vector<double> out;
  out.reserve(m.ops.size());
  for (const OpMeasurement& o : m.ops) out.push_back(o.executed ? o.*figure : 0.0);
  return out;
}

std::vector<double> medians(const Measurement& m) { return per_op(m, &OpMeasurement::median); }

// The eager half of a pair: also timed with the stream held (OpMeasurement::device), so the
// dispatch fit sees the queued launch cost apart from the waits for the host.
RunOptions eager_pair_run(RunOptions o) {
  o.device_times = true;
  return o;
}

Graph in_mode(Graph g, bool graphed) {
  g.graphed = graphed;
  return g;
}

}  // namespace

LaunchSamples sweep_launch(const SweepContext& ctx, SweepSummary& s) {
  const CalibrationPlan& p = ctx.plan;
  const bool pair = p.graph_mode;
  SweepClock clock(ctx, "launch", pair ? 2 : 1);
  const Graph chain = launch_chain_graph(p.launch_chain_ops, p.launch_chain_elements);
  LaunchSamples out;
  const Measurement chain_m = ctx.backend.run(in_mode(chain, p.graph_mode), p.run);
  const std::vector<double> timed = medians(chain_m);
  clock.step();
  out.chain = timed;
  out.op_timing = chain_m.op_timing;
  if (pair) {
    const Measurement eager_m = ctx.backend.run(in_mode(chain, false), eager_pair_run(p.run));
    clock.step();
    out.cases.push_back({chain, timed, medians(eager_m), per_op(eager_m, &OpMeasurement::host),
                         per_op(eager_m, &OpMeasurement::device)});
  }
  s.graphs = pair ? 2 : 1;
  s.seconds = clock.seconds();
  return out;
}

namespace {

// "cal-gpt-1280 train 2x768 +bf16+flash_attention": the case a recorded point came from.
std::string case_label(const KernelCase& c) {
  const Workload& w = c.workload;
  const int64_t tokens = w.phase == Phase::train ? w.seq : w.phase == Phase::decode ? w.decode_context() : w.prompt;
  std::string label = fmt::format("{} {} {}x{} ", c.model.name, name_of(w.phase), w.batch, tokens);
  for (const StackStep& s : c.stack) label += s.name;
  return label;
}

// The cells of one dtype's grid within the plan's budgets (the others counted in
// over_budget), keeping only unaligned ones (calibration_variant) when asked, and then in
// both layouts of B (stored [k, n], and [n, k] as a tied lm_head's table): cuBLAS runs
// other kernels for each (gemm_layout_variant).
std::vector<GemmCell> cells_in_budget(const SweepContext& ctx, const GemmSweepPlan& gp, DType t,
                                      bool unaligned_only, std::size_t& over_budget) {
  std::vector<GemmCell> cells;
  auto consider = [&](const GemmCell& c) {
    if (unaligned_only) {
      Op probe;
      probe.kind = OpKind::gemm;
      probe.dtype = t;
      probe.attrs.m = c.m, probe.attrs.n = c.n, probe.attrs.k = c.k;
      probe.attrs.trans_b = c.trans_b;
      if (gemm_rows_aligned(probe)) return;
    }
    const double flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
    const double bytes = gemm_cell_bytes(c);
    const double roofline = std::max(flops / ctx.base.peak(t), bytes / ctx.base.memory_bandwidth);
    const bool too_slow = gp.max_roofline_seconds > 0 && roofline > gp.max_roofline_seconds;
    const bool too_large = gp.max_cell_flops > 0 && flops > gp.max_cell_flops;
    if (too_slow || too_large || bytes > gp.max_cell_bytes) {
      ++over_budget;
      return;
    }
    cells.push_back(c);
  };
  const std::size_t nn = gp.n.size(), nk = gp.k.size();
  for (std::size_t i = 0; i < gp.m.size(); ++i)
    for (std::size_t j = 0; j < nn; ++j)
      for (std::size_t l = 0; l < nk; ++l) {
        const std::size_t index = (i * nn + j) * nk + l;
        consider(GemmCell{gp.m[i], gp.n[j], gp.k[l], t, index, false});
        if (unaligned_only) consider(GemmCell{gp.m[i], gp.n[j], gp.k[l], t, index, true});
      }
  return cells;
}

// Drops the cells the backend refuses (layouts, dtypes); `refused` keeps the first reason.
std::vector<GemmCell> runnable_cells(const SweepContext& ctx, std::vector<GemmCell> cells, std::string& refused) {
  const Graph all = gemm_cells_graph(cells);
  std::vector<GemmCell> runnable;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const std::string why = ctx.backend.unsupported_reason(all.ops[i], all);
    if (why.empty()) runnable.push_back(cells[i]);
    else if (refused.empty()) refused = why;
  }
  return runnable;
}

// Cells of a measured GEMM graph faster than the datasheet roofline allows (efficiency above
// 1 after the graph gap). Operands streamed from memory cannot do that: the graph's per-op
// times are off (an H100 once timed the cells of a whole graph alternately 2x slow and 1.5x
// fast, against two other calibrations of the same cells).
int impossible_cells(const SweepContext& ctx, const Graph& g, const Measurement& m, double launch_graph) {
  int n = 0;
  for (std::size_t i = 0; i < g.ops.size() && i < m.ops.size(); ++i) {
    if (!m.ops[i].executed || !(m.ops[i].median > 0)) continue;
    const CalibrationPoint p = calibration_point(g.ops[i], predict_op(g.ops[i], g, ctx.base), ctx.base);
    if (p.roofline_seconds > kernel_seconds(m.ops[i].median, launch_graph, kernel_launches(g.ops[i]))) ++n;
  }
  return n;
}

std::string remeasured_note(const SweepSummary& s) {
  return s.remeasured == 0 ? std::string()
                           : fmt::format("; {} graph(s) measured twice (cells faster than the roofline)", s.remeasured);
}

// Runs the cells packed into graphs of at most max_graph_bytes of operands, timing the sweep
// into `s` (graphs, seconds); `each` sees every graph with its measurement. A graph with
// impossible cells is measured once more and the run with fewer of them kept.
void run_cells(const SweepContext& ctx, const GemmSweepPlan& gp, double launch_graph, const std::vector<GemmCell>& cells,
               SweepSummary& s, std::string& refused,
               const std::function<void(const std::vector<GemmCell>&, const Graph&, const Measurement&)>& each) {
  std::vector<double> bytes;
  for (const GemmCell& c : cells) bytes.push_back(gemm_cell_bytes(c));
  const auto groups = pack_interleaved(bytes, gp.max_graph_bytes);
  SweepClock clock(ctx, s.sweep, static_cast<int>(groups.size()));
  for (const auto& group : groups) {
    std::vector<GemmCell> part;
    for (std::size_t i : group) part.push_back(cells[i]);
    Graph g = gemm_cells_graph(part);
    g.graphed = ctx.plan.graph_mode;
    try {
      Measurement m = ctx.backend.run(g, ctx.plan.run);
      if (const int bad = impossible_cells(ctx, g, m, launch_graph); bad > 0) {
        Measurement again = ctx.backend.run(g, ctx.plan.run);
        if (impossible_cells(ctx, g, again, launch_graph) < bad) m = std::move(again);
        ++s.remeasured;
      }
      each(part, g, m);
    } catch (const NotExecutable& e) {
      if (refused.empty()) refused = e.what();
    }
    ++s.graphs;
    clock.step();
  }
  s.seconds = clock.seconds();
}

// A table or curve is keyed by the dtype the cost model prices at: measure only dtypes the
// base prices as themselves (a CPU without fp8 would otherwise overwrite its bf16 table).
// Otherwise `s` is reported as skipped.
bool skipped_unpriced(const SweepContext& ctx, DType t, SweepSummary& s, std::vector<SweepSummary>& out) {
  if (priced_dtype(t, ctx.base) == t) return false;
  s.fitted = fmt::format("skipped: {} has no {} peak", ctx.base.name, name_of(t));
  out.push_back(s);
  return true;
}

}  // namespace

void sweep_gemm(const SweepContext& ctx, const GemmSweepPlan& gp, double launch_graph, CurveFitter& fit,
                std::map<DType, GemmTable>& tables, std::vector<SweepSummary>& out) {
  for (DType t : gp.dtypes) {
    SweepSummary s;
    s.sweep = fmt::format("gemm {}", name_of(t));
    if (skipped_unpriced(ctx, t, s, out)) continue;
    const std::size_t nm = gp.m.size(), nn = gp.n.size(), nk = gp.k.size();
    std::size_t over_budget = 0;
    std::string refused;
    const std::vector<GemmCell> cells =
        runnable_cells(ctx, cells_in_budget(ctx, gp, t, false, over_budget), refused);
    std::vector<std::optional<double>> measured(nm * nn * nk);
    std::size_t ran = 0;
    run_cells(ctx, gp, launch_graph, cells, s, refused, [&](const std::vector<GemmCell>& part, const Graph& g, const Measurement& m) {
      for (std::size_t i = 0; i < part.size(); ++i) {
        if (!m.ops[i].executed || !(m.ops[i].median > 0)) continue;
        const OpCost cost = predict_op(g.ops[i], g, ctx.base);
        const CalibrationPoint pt = calibration_point(g.ops[i], cost, ctx.base);
        const double kernel = kernel_seconds(m.ops[i].median, launch_graph, kernel_launches(g.ops[i]));
        const double eff = pt.roofline_seconds / kernel;
        measured[part[i].index] = eff;
        fit.add_point("", OpClass::gemm, pt.compute_bound, {pt.roofline_seconds, eff});
        fit.record({s.sweep + " grid", g.ops[i], pt, cost.flops, cost.bytes, m.ops[i].median, kernel, eff});
        ++ran;
      }
    });
    if (ran == 0) {
      s.fitted = fmt::format("skipped: no cell ran{}", refused.empty() ? "" : " (" + refused + ")");
      out.push_back(s);
      continue;
    }
    std::vector<double> m(gp.m.begin(), gp.m.end()), n(gp.n.begin(), gp.n.end()), k(gp.k.begin(), gp.k.end());
    tables[t] = fill_gemm_table(std::move(m), std::move(n), std::move(k), measured);
    s.fitted = fmt::format("{} of {} cells measured, {} over budget filled{}{}", ran, nm * nn * nk, over_budget,
                           refused.empty() ? "" : "; some refused: " + refused, remeasured_note(s));
    out.push_back(s);
  }
}

void sweep_unaligned_gemm(const SweepContext& ctx, const GemmSweepPlan& gp, double launch_graph, CurveFitter& fit,
                          std::vector<SweepSummary>& out) {
  for (DType t : gp.dtypes) {
    SweepSummary s;
    s.sweep = fmt::format("gemm {} unaligned", name_of(t));
    if (skipped_unpriced(ctx, t, s, out)) continue;
    std::size_t over_budget = 0;
    std::string refused;
    const std::vector<GemmCell> cells = runnable_cells(ctx, cells_in_budget(ctx, gp, t, true, over_budget), refused);
    std::size_t ran = 0;
    run_cells(ctx, gp, launch_graph, cells, s, refused, [&](const std::vector<GemmCell>&, const Graph& g, const Measurement& m) {
      const std::size_t before = fit.point_count();
      fit.add(g, m, ctx.base, launch_graph, s.sweep);
      ran += fit.point_count() - before;
    });
    s.fitted = ran == 0 ? fmt::format("skipped: no cell ran{}", refused.empty() ? "" : " (" + refused + ")")
                        : fmt::format("{} cells measured (gemm/{}/*/unaligned curves), {} over budget{}{}", ran,
                                      name_of(t), over_budget, refused.empty() ? "" : "; some refused: " + refused,
                                      remeasured_note(s));
    out.push_back(s);
  }
}

void sweep_kernels(const SweepContext& ctx, double launch_graph, CurveFitter& fit, LaunchSamples& pairs,
                   SweepSummary& s) {
  const CalibrationPlan& p = ctx.plan;
  int total = 0;
  for (const KernelCase& c : p.kernels) total += c.eager_pair && p.graph_mode ? 2 : 1;
  SweepClock clock(ctx, "kernels", total);
  int skipped = 0;
  std::string why_skipped;
  for (const KernelCase& c : p.kernels) {
    try {
      Graph g = build_stack_graph(c.model, c.workload, c.stack, c.stack.size() - 1, BuildOptions::sampled(1));
      g.graphed = p.graph_mode;
      if (const std::string why = graph_unsupported_reason(ctx.backend, g); !why.empty())
        throw NotExecutable(why);
      const Measurement m = ctx.backend.run(g, p.run);
      ++s.graphs;
      clock.step();
      std::optional<Measurement> e;
      if (c.eager_pair && p.graph_mode) {
        e = ctx.backend.run(in_mode(g, false), eager_pair_run(p.run));
        pairs.cases.push_back({g, medians(m), medians(*e), per_op(*e, &OpMeasurement::host),
                               per_op(*e, &OpMeasurement::device)});
        ++s.graphs;
        clock.step();
      }
      fit.add(g, m, ctx.base, launch_graph, case_label(c), e ? &*e : nullptr);
    } catch (const NotExecutable& e) {
      ++skipped;
      if (why_skipped.empty()) why_skipped = e.what();
      clock.step();
    } catch (const ConfigError& e) {
      ++skipped;
      if (why_skipped.empty()) why_skipped = e.what();
      clock.step();
    }
  }
  s.seconds = clock.seconds();
  if (skipped > 0) s.fitted = fmt::format("{} case(s) skipped: {}", skipped, why_skipped);
}

void sweep_copies(const SweepContext& ctx, Hardware& hw, SweepSummary& s) {
  const CalibrationPlan& p = ctx.plan;
  if (p.copy_bytes.empty()) {
    s.fitted = "skipped: " + (p.copy_skip_reason.empty() ? std::string("not planned") : p.copy_skip_reason);
    return;
  }
  SweepClock clock(ctx, "host copies", 2);
  // Eager: a pageable copy cannot be captured into a CUDA graph, and both residences are
  // timed the same way; the op's eager launch is taken off the intercept.
  auto run = [&](Residence r, std::vector<double>& bytes) {
    const Graph g = upload_graph(p.copy_bytes, r);
    const Measurement m = ctx.backend.run(g, p.run);
    bytes.clear();
    std::vector<double> t;
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      bytes.push_back(g.tensor(g.ops[i].inputs.front()).bytes());
      t.push_back(m.ops[i].median);
    }
    ++s.graphs;
    clock.step();
    return t;
  };
  try {
    std::vector<double> bytes;
    const std::vector<double> pinned = run(Residence::host_pinned, bytes);
    hw.pcie = fit_host_link(bytes, pinned, hw.launch_eager);
    const std::vector<double> pageable = run(Residence::host_pageable, bytes);
    hw.host_copy_bandwidth = fit_host_copy_bandwidth(bytes, pageable, hw.pcie);
    s.fitted = fmt::format("pcie {:.1f} GB/s + {}, pageable staging {}", hw.pcie.bandwidth / 1e9,
                           format_duration(hw.pcie.latency),
                           hw.host_copy_bandwidth > 0 ? fmt::format("{:.1f} GB/s", hw.host_copy_bandwidth / 1e9)
                                                      : std::string("not slower (datasheet kept)"));
  } catch (const std::exception& e) {
    s.fitted = fmt::format("skipped: {}", e.what());
  }
  s.seconds = clock.seconds();
}

void sweep_collectives(const SweepContext& ctx, Calibration& cal, SweepSummary& s) {
  const int gpus = ctx.backend.gpu_count();
  if (gpus < 2) {
    s.fitted = fmt::format("skipped: the {} backend spans {} device, collectives need 2 or more GPUs "
                           "(datasheet alpha-beta kept)", ctx.backend.name(), gpus);
    return;
  }
  std::vector<int> groups;
  for (int n = 2; n <= gpus; n *= 2) groups.push_back(n);
  const CalibrationPlan& p = ctx.plan;
  SweepClock clock(ctx, "collectives", static_cast<int>(groups.size() * p.collectives.size()));
  std::string failed;
  for (int n : groups)
    for (Collective c : p.collectives) {
      try {
        const std::vector<double> t = ctx.backend.time_collective(c, n, p.collective_bytes);
        cal.collectives[{c, n}] = fit_collective(c, n, p.collective_bytes, t);
      } catch (const std::exception& e) {
        if (failed.empty()) failed = e.what();
      }
      ++s.graphs;
      clock.step();
    }
  s.seconds = clock.seconds();
  s.fitted = fmt::format("{} fits over groups of 2..{}", cal.collectives.size(), groups.back());
  // A glimpse of the largest group's all-reduce: its latency floor and its largest buffer.
  const auto ar = cal.collectives.find({Collective::all_reduce, groups.back()});
  if (ar != cal.collectives.end() && !ar->second.payload.empty())
    s.fitted += fmt::format("; all_reduce over {}: {} at {}, {} at {}", groups.back(),
                            format_duration(ar->second.seconds.front()), format_bytes(ar->second.payload.front()),
                            format_duration(ar->second.seconds.back()), format_bytes(ar->second.payload.back()));
  if (!failed.empty()) s.fitted += "; failed: " + failed;
}

}  // namespace perfsim
