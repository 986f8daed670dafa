#include "core/run/serve_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "core/run/engine_clock.hpp"
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

// Runs stack step `upto` on the backend's engine session; nullopt with `why` set when the run
// is not made.
std::optional<ServeStepResult::Executed> execute_serving(const Scenario& s, EngineSession& session,
                                                         const Hardware& device_hw, const std::vector<Request>& requests,
                                                         const std::vector<StackStep>& stack, std::size_t upto,
                                                         const ServePrediction& predicted, std::string& why) {
  const ServeSpec& spec = *s.serve;
  const double predicted_seconds = predicted.run.end;
  if (predicted_seconds > s.execute.serve_seconds) {
    why = fmt::format("predicted to last {} on {}, beyond execute.serve_seconds = {} (the engine runs in real time)",
                      format_duration(predicted_seconds), device_hw.name, format_sig3(s.execute.serve_seconds));
    return std::nullopt;
  }
  const auto start = std::chrono::steady_clock::now();
  ServeStepResult::Executed out;
  const KvPool pool = executed_pool(predicted.pool, requests);
  bool cuda_graphs = false;
  for (std::size_t i = 0; i <= upto && i < stack.size(); ++i)
    for (const PassSpec& p : stack[i].passes) cuda_graphs = cuda_graphs || p.name == "cuda_graphs";
  ExecutedClock clock(session, s.model, engine_graph_stack(stack, upto), pool, spec.seed, cuda_graphs);
  // The largest step the scheduler forms: its token budget (a static batch's padded prompts
  // may exceed it; 8,192 at most, vLLM's default profiling size).
  clock.prime(std::min<int64_t>(predicted.config.step_tokens(s.model.max_seq), 8192));
  out.run = run_engine(requests, predicted.config, pool, s.model.max_seq, spec.arrivals.think, clock);
  out.metrics = serve_metrics(out.run, spec.slo);
  StepPricer pricer(s.model, device_hw, stack, upto);
  pricer.set_swap_block_bytes(pool.block_bytes);
  clock.price_steps(pricer);
  out.steps = clock.steps();
  out.held_bytes = session.held_bytes();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
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
    if (session != nullptr && (replicas > 1 || layout.tp > 1 || layout.pp > 1)) {
      r.not_executed = fmt::format("{} is predicted; an executed run serves one engine on one device",
                                   describe_engine_layout(layout));
    } else if (session != nullptr) {
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
