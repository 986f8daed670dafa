#include "core/run/serve_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "core/run/engine_clock.hpp"
#include "core/run/serve_ranks.hpp"
#include "core/serve/kv_blocks.hpp"
#include "core/serve/traffic.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

std::string describe(const Lengths& l) {
  switch (l.dist) {
    case LengthDist::fixed: return fmt::format("{}", format_sig3(l.mean));
    case LengthDist::file: return fmt::format("from {} ({} values)", l.file, l.values.size());
    default: break;
  }
  const char* name = l.dist == LengthDist::uniform ? "uniform" : l.dist == LengthDist::normal ? "normal" : "lognormal";
  if (l.dist == LengthDist::uniform) return fmt::format("uniform {}..{}", l.min, l.max);
  std::string s = fmt::format("{} mean {}", name, format_sig3(l.mean));
  if (l.max > 0) s += fmt::format(" max {}", l.max);
  return s;
}

std::string describe(const Arrivals& a) {
  switch (a.kind) {
    case ArrivalKind::poisson: return fmt::format("poisson {}/s", format_sig3(a.rate));
    case ArrivalKind::gamma: return fmt::format("gamma {}/s burstiness {}", format_sig3(a.rate), format_sig3(a.burstiness));
    case ArrivalKind::ramp: return fmt::format("ramp {} to {}/s", format_sig3(a.start_rate), format_sig3(a.rate));
    case ArrivalKind::closed: return fmt::format("closed loop, {} users, think {} s", a.users, format_sig3(a.think));
    case ArrivalKind::trace: return fmt::format("trace {}", a.file);
  }
  return "?";
}

// Where the step prices come from, as the report's profile line says it.
std::string profile_text(const Hardware& hw) {
  if (!hw.calibrated) return hw.kind == "cpu" ? "estimated from the CPU model, uncalibrated" : "datasheet, uncalibrated";
  const Provenance& m = hw.calibration.measured_on;
  std::string s = "calibrated";
  if (!m.device.empty()) s += " on " + m.device;
  if (!m.date.empty()) s += " " + m.date;
  if (const std::string stale = kernels_freshness(m); !stale.empty()) s += "; " + stale;
  return s;
}

// The executed engine's pool: the predicted one, but no more blocks than every request of the
// run holds at once (so the scheduler meets the same limits while the backend allocates only
// what the run can use).
KvPool executed_pool(const KvPool& predicted, const std::vector<Request>& requests) {
  KvPool pool = predicted;
  int64_t most = 1;
  for (const Request& r : requests) most += blocks_for(r.prompt + r.output, pool.block);
  pool.blocks = std::min(pool.blocks, most);
  return pool;
}

// The engine run of `requests` on the backend's engine session, on its wall clock. `before_start`
// runs once the session is primed (or failed to be), before the clock starts: ranks serving side
// by side meet there, so none waits for one that failed.
// With `followers`, the engine is tensor-parallel over every rank (`options` its layout) and
// this is rank 0, which schedules and sends each step to the others (follow_engine).
ServeStepResult::Executed serve_on_clock(const Scenario& s, EngineSession& session, const Hardware& device_hw,
                                         const std::vector<Request>& requests, const std::vector<StackStep>& stack,
                                         std::size_t upto, const ServePrediction& predicted,
                                         const std::function<void()>& before_start, const BuildOptions& options = {},
                                         Communicator* followers = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  ServeStepResult::Executed out;
  const KvPool pool = executed_pool(predicted.pool, requests);
  bool cuda_graphs = false;
  for (std::size_t i = 0; i <= upto && i < stack.size(); ++i)
    for (const PassSpec& p : stack[i].passes) cuda_graphs = cuda_graphs || p.name == "cuda_graphs";
  std::optional<ExecutedClock> clock;
  try {
    clock.emplace(session, s.model, engine_graph_stack(stack, upto), pool, s.serve->seed, cuda_graphs, options,
                  followers);
    // The largest step the scheduler forms: its token budget (a static batch's padded prompts
    // may exceed it; 8,192 at most, vLLM's default profiling size).
    clock->prime(std::min<int64_t>(predicted.config.step_tokens(s.model.max_seq), 8192));
  } catch (...) {
    before_start();
    throw;
  }
  before_start();
  clock->restart();
  out.run = run_engine(requests, predicted.config, pool, s.model.max_seq, s.serve->arrivals.think, *clock);
  out.metrics = serve_metrics(out.run, s.serve->slo);
  ParallelSpec engine = predicted.layout;
  engine.dp = 1;
  StepPricer pricer(s.model, device_hw, stack, upto, engine);
  pricer.set_swap_block_bytes(pool.block_bytes);
  clock->price_steps(pricer);
  out.steps = clock->steps();
  out.held_bytes = session.held_bytes();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// Why an executed run of `predicted_seconds` would not be made ("" = it is made).
std::string too_long(const Scenario& s, const Hardware& device_hw, double predicted_seconds) {
  if (predicted_seconds <= s.execute.serve_seconds) return "";
  return fmt::format("predicted to last {} on {}, beyond execute.serve_seconds = {} (the engine runs in real time)",
                     format_duration(predicted_seconds), device_hw.name, format_sig3(s.execute.serve_seconds));
}

// Runs stack step `upto` on the backend's engine session; nullopt with `why` set when the run
// is not made.
std::optional<ServeStepResult::Executed> execute_serving(const Scenario& s, EngineSession& session,
                                                         const Hardware& device_hw, const std::vector<Request>& requests,
                                                         const std::vector<StackStep>& stack, std::size_t upto,
                                                         const ServePrediction& predicted, std::string& why) {
  why = too_long(s, device_hw, predicted.run.end);
  if (!why.empty()) return std::nullopt;
  return serve_on_clock(s, session, device_hw, requests, stack, upto, predicted, [] {});
}

// One tensor-parallel engine over every rank: rank 0 schedules, runs its share of each step and
// reports; the others run theirs as rank 0 sends them (a failure there ends every rank).
std::optional<ServeStepResult::Executed> execute_tensor_parallel(const Scenario& s, EngineSession& session,
                                                                 const Hardware& device_hw,
                                                                 const std::vector<Request>& requests,
                                                                 const std::vector<StackStep>& stack, std::size_t upto,
                                                                 const ServePrediction& predicted, Communicator& ranks,
                                                                 std::string& why) {
  why = too_long(s, device_hw, predicted.run.end);
  if (!why.empty()) return std::nullopt;
  BuildOptions options;
  options.parallel.tp = predicted.layout.tp;
  if (ranks.rank() != 0) {
    follow_engine(session, s.model, engine_graph_stack(stack, upto), options, ranks);
    why = "rank 0 reports the engine";
    return std::nullopt;
  }
  try {
    return serve_on_clock(s, session, device_hw, requests, stack, upto, predicted, [] {}, options, &ranks);
  } catch (const NotExecutable& e) {
    why = e.what();
  } catch (const ConfigError& e) {
    why = e.what();
  }
  return std::nullopt;
}

// Replicas on ranks: this rank serves the requests the predicted run's router sent replica
// `rank`, every rank at once; rank 0 gathers and joins them (the others return nullopt).
std::optional<ServeStepResult::Executed> execute_replicas(const Scenario& s, EngineSession& session,
                                                          const Hardware& device_hw,
                                                          const std::vector<Request>& requests,
                                                          const std::vector<StackStep>& stack, std::size_t upto,
                                                          const ServePrediction& predicted, Communicator& ranks,
                                                          std::string& why) {
  why = too_long(s, device_hw, predicted.run.end);
  if (!why.empty()) return std::nullopt;
  ReplicaShare share;
  std::vector<Request> mine;
  for (const Request& q : requests)
    if (predicted.replica_of.at(static_cast<std::size_t>(q.id)) == ranks.rank()) {
      Request own = q;
      own.id = static_cast<int64_t>(mine.size());
      mine.push_back(own);
      share.ids.push_back(q.id);
    }
  try {
    share.executed = serve_on_clock(s, session, device_hw, mine, stack, upto, predicted, [&] { ranks.barrier(); });
  } catch (const NotExecutable& e) {
    share.not_executed = e.what();
  } catch (const ConfigError& e) {
    share.not_executed = e.what();
  }
  const std::vector<std::string> packed = ranks.gather_to_root(pack_replica(share));
  if (ranks.rank() != 0) {
    why = "rank 0 reports the replicas";
    return std::nullopt;
  }
  std::vector<ReplicaShare> shares;
  for (std::size_t r = 0; r < packed.size(); ++r) {
    shares.push_back(unpack_replica(packed[r]));
    if (!shares.back().not_executed.empty()) {
      why = fmt::format("rank {}: {}", r, shares.back().not_executed);
      return std::nullopt;
    }
  }
  return join_replicas(shares, requests, predicted.pool, s.serve->slo);
}

}  // namespace

std::string describe(const ServeSpec& s) {
  std::string out = fmt::format("serve {} requests, {}", s.requests, describe(s.arrivals));
  if (s.arrivals.kind != ArrivalKind::trace)
    out += fmt::format(", prompt {}, output {}", describe(s.prompt), describe(s.output));
  if (s.prefix.groups > 0)
    out += fmt::format(", {} shared prefixes of {} tokens ({}% of requests)", s.prefix.groups, s.prefix.tokens,
                       format_sig3(s.prefix.share * 100));
  out += fmt::format(", seed {}", s.seed);
  return out;
}

RunResult run_serving(const Scenario& s, Backend* backend, const Hardware* device_hw, const RunnerHooks& hooks) {
  const ServeSpec& spec = *s.serve;
  const bool executing = backend != nullptr && s.execute.enabled;
  const Hardware& primary = executing && device_hw != nullptr ? *device_hw : s.hardware.front();
  const std::vector<StackStep> baseline = {StackStep{"baseline", {}, ""}};
  const std::vector<StackStep>& stack = s.stacks.empty() ? baseline : s.stacks;

  RunResult out = run_header(s, backend);
  out.workload = describe(spec);
  out.traffic = out.workload;
  out.device = primary.name;

  std::vector<Request> requests;
  try {
    requests = make_requests(spec, s.model.max_seq);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}{}", spec.where, e.what()));
  }
  // One engine session for every stack step: weights stay on the device while their dtype does.
  std::unique_ptr<EngineSession> session;
  std::string no_session;
  if (executing) {
    try {
      session = backend->open_engine(spec.seed);
    } catch (const NotExecutable& e) {
      no_session = e.what();
    }
  }
  for (std::size_t i = 0; i < stack.size(); ++i) {
    if (hooks.progress) hooks.progress(i, stack.size(), stack[i].name);
    ServeStepResult r;
    r.step = stack[i].name;
    r.hardware = primary.name;
    r.profile = profile_text(primary);
    const ParallelSpec layout = step_parallel(s.parallel, stack, i);
    const int replicas = std::max(1, layout.dp);
    try {
      r.predicted = predict_serving(s.model, primary, spec, requests, stack, i, layout);
    } catch (const DoesNotFit& e) {
      // A step whose engine does not fit its GPU is noted; the other steps still run.
      r.does_not_fit = e.what();
      r.scheduler = describe(scheduler_config(stack, i), s.model.max_seq);
      out.serve.push_back(std::move(r));
      continue;
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      // Scheduler knobs name their step already.
      if (msg.rfind(stack[i].where, 0) == 0 && !stack[i].where.empty()) throw;
      throw ConfigError(fmt::format("{}step '{}': {}", stack[i].where, stack[i].name, msg));
    }
    r.scheduler = describe(r.predicted.config, s.model.max_seq);
    for (const Hardware& hw : s.hardware) {
      if (hw.name == primary.name) continue;
      ServeStepResult::WhatIf w;
      w.hardware = hw.name;
      try {
        w.metrics = predict_serving(s.model, hw, spec, requests, stack, i, layout).metrics;
      } catch (const ConfigError& e) {
        w.error = e.what();
      }
      r.what_if.push_back(std::move(w));
    }
    if (executing && session == nullptr) r.not_executed = no_session;
    const int rank_count = hooks.ranks != nullptr ? hooks.ranks->size() : 1;
    const bool one_gpu_engines = layout.tp == 1 && layout.pp == 1 && !r.predicted.config.disaggregated();
    const bool closed_loop = spec.arrivals.kind == ArrivalKind::closed;
    if (session == nullptr) {
      // nothing to run on (r.not_executed says why when execution was asked for)
    } else if (replicas == 1 && layout.tp > 1 && layout.pp == 1 && !r.predicted.config.disaggregated() &&
               rank_count == layout.tp) {
      r.executed = execute_tensor_parallel(s, *session, primary, requests, stack, i, r.predicted, *hooks.ranks,
                                           r.not_executed);
    } else if (replicas > 1 && one_gpu_engines && rank_count == replicas && !closed_loop) {
      r.executed = execute_replicas(s, *session, primary, requests, stack, i, r.predicted, *hooks.ranks,
                                    r.not_executed);
    } else if (replicas > 1 || !one_gpu_engines) {
      r.not_executed =
          one_gpu_engines && !closed_loop
              ? fmt::format("{} is predicted; its replicas execute on as many ranks (perfsim run --gpus {}, or "
                            "mpirun -np {})",
                            describe_engine_layout(layout), replicas, replicas)
              : fmt::format("{} is predicted; executed runs serve one-GPU replicas of open-loop traffic, one a "
                            "rank, or one tensor-parallel engine over every rank (--gpus = tp)",
                            describe_engine_layout(layout));
    } else if (rank_count > 1 && hooks.ranks->rank() != 0) {
      r.not_executed = "one engine serves on rank 0";
    } else {
      try {
        r.executed = execute_serving(s, *session, primary, requests, stack, i, r.predicted, r.not_executed);
      } catch (const NotExecutable& e) {
        r.not_executed = e.what();
      } catch (const ConfigError& e) {
        r.not_executed = e.what();
      }
    }
    out.serve.push_back(std::move(r));
  }
  return out;
}

}  // namespace perfsim
