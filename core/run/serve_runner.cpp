#include "core/run/serve_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "core/run/serve_execution.hpp"
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
    if (session != nullptr) {
      const ServeExecution x{s, *session, primary, requests, stack, i, r.predicted};
      r.executed = execute_step(x, hooks.ranks, r.not_executed);
    }
    out.serve.push_back(std::move(r));
  }
  return out;
}

}  // namespace perfsim
