// Cartesian expansion of sweep axes into scenario points.
#include "dsl/sweep.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "core/units.hpp"

namespace perfsim::dsl {

namespace {

void apply(Scenario& s, const std::string& key, const std::string& value, const SweepCatalog& named) {
  if (key == "model") {
    s.model = named.models.at(value);
  } else if (key == "hardware") {
    s.hardware = {named.hardware.at(value)};
  } else if (key == "kv_cache") {
    s.workload.kv_cache = value == "true";
  } else if (key == "rate") {
    ArrivalKind k = s.serve->arrivals.kind;
    if (k != ArrivalKind::poisson && k != ArrivalKind::gamma && k != ArrivalKind::ramp)
      throw ConfigError("sweep.rate varies the arrival rate of poisson{}, gamma{} or ramp{} arrivals; this serve{} has "
                        "other arrivals");
    s.serve->arrivals.rate = std::stod(value);
  } else if (key == "users") {
    if (s.serve->arrivals.kind != ArrivalKind::closed)
      throw ConfigError("sweep.users varies the clients of closed{} arrivals; this serve{} has open-loop arrivals");
    s.serve->arrivals.users = std::stoll(value);
  } else if (key == "requests") {
    s.serve->requests = std::stoll(value);
  } else {
    const int64_t v = std::stoll(value);
    if (key == "batch") s.workload.batch = v;
    else if (key == "prompt") s.workload.prompt = v;
    else if (key == "new_tokens") s.workload.new_tokens = v;
    else if (key == "seq") s.workload.seq = v;
    else if (key == "grad_accum") s.workload.grad_accum = v;
    else if (key == "gpus") set_gpus(s.parallel, static_cast<int>(v), "sweep.gpus");
    else if (key == "dp") s.parallel.dp = static_cast<int>(v);
    else if (key == "tp") s.parallel.tp = static_cast<int>(v);
    else if (key == "pp") s.parallel.pp = static_cast<int>(v);
    else if (key == "cp") s.parallel.cp = static_cast<int>(v);
    else if (key == "ep") s.parallel.ep = static_cast<int>(v);
    else if (key == "zero") s.parallel.zero = static_cast<int>(v);
    else throw ConfigError(fmt::format("unknown sweep key '{}'", key));
  }
}

}  // namespace

const std::vector<std::string>& sweep_keys() {
  // Layout degrees come before gpus, so gpus = N derives dp from the degrees of its point.
  static const std::vector<std::string> keys = {"model",      "hardware", "rate", "users", "requests", "batch", "prompt", "new_tokens",
                                                "seq",        "grad_accum", "kv_cache", "tp", "pp",
                                                "cp",         "ep",       "zero",  "dp",     "gpus"};
  return keys;
}

bool is_integer_sweep_key(const std::string& key) {
  return key == "users" || key == "requests" || key == "batch" || key == "prompt" || key == "new_tokens" || key == "seq" ||
         key == "grad_accum" || key == "gpus" || key == "dp" || key == "tp" || key == "pp" ||
         key == "cp" || key == "ep" || key == "zero";
}

std::string sweep_key_problem(const std::string& key, Phase p, bool serve) {
  const bool serve_key = key == "rate" || key == "users" || key == "requests";
  if (serve) {
    if (serve_key || key == "model" || key == "hardware") return "";
    return fmt::format("sweep key '{}' does not apply to a serve{{}} workload (its keys: rate, users, requests; and "
                       "model, hardware)",
                       key);
  }
  if (serve_key)
    return fmt::format("sweep key '{}' varies serving traffic; it needs workload = serve{{...}}", key);
  const bool inference = p == Phase::prefill || p == Phase::decode;
  bool ok = true;
  if (key == "prompt" || key == "new_tokens") ok = inference;
  if (key == "kv_cache") ok = p == Phase::decode;
  if (key == "seq" || key == "grad_accum" || key == "zero") ok = p == Phase::train;
  if (ok) return "";
  const char* fits = p == Phase::train ? "batch, seq, grad_accum, zero"
                     : p == Phase::decode ? "batch, prompt, new_tokens, kv_cache"
                                          : "batch, prompt, new_tokens";
  return fmt::format("sweep key '{}' does not apply to a {} workload (its keys: {}; and model, "
                     "hardware, gpus, dp, tp, pp, cp, ep)",
                     key, name_of(p), fits);
}

std::string sweep_point_label(const std::map<std::string, std::string>& values) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : values) parts.push_back(k + "=" + v);
  return fmt::format("{}", fmt::join(parts, " "));
}

std::vector<ScenarioPoint> expand_sweep(const Scenario& base, const SweepCatalog& named) {
  Scenario plain = base;
  plain.sweep.clear();
  std::vector<ScenarioPoint> points = {ScenarioPoint{{}, plain}};
  // Axes in sweep_keys() order, so the first key is the outermost loop.
  std::vector<const SweepAxis*> axes;
  for (const std::string& key : sweep_keys())
    for (const SweepAxis& a : base.sweep)
      if (a.key == key) axes.push_back(&a);
  // Each point is a scenario held in memory and predicted in turn: refuse a sweep that could
  // not finish before expanding it.
  std::size_t total = 1;
  std::vector<std::string> sizes;
  for (const SweepAxis* axis : axes) {
    total = std::min(total * std::max<std::size_t>(axis->values.size(), 1), max_sweep_points + 1);
    sizes.push_back(fmt::format("{} {}", axis->values.size(), axis->key));
  }
  if (total > max_sweep_points)
    throw ConfigError(fmt::format("sweep has more than {} points ({}); split it into smaller sweeps",
                                  format_rate(static_cast<double>(max_sweep_points)),
                                  fmt::join(sizes, " x ")));
  for (const SweepAxis* axis : axes) {
    std::vector<ScenarioPoint> next;
    next.reserve(points.size() * axis->values.size());
    for (const ScenarioPoint& p : points)
      for (const std::string& v : axis->values) {
        check_deadline();
        ScenarioPoint q = p;
        q.values[axis->key] = v;
        try {
          apply(q.scenario, axis->key, v, named);
        } catch (const ConfigError& e) {
          // The point's values so far say which combination failed (gpus with its degrees).
          throw ConfigError(fmt::format("sweep point {}: {}", sweep_point_label(q.values), e.what()));
        }
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  return points;
}

}  // namespace perfsim::dsl
