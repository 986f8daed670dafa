// `perfsim explain SCENARIO`: one stack step's graph priced op by op on one hardware.
// The graph is built with a single transformer layer; counts carry the rest of the model, so
// the totals equal those of a full build while the table stays one layer long.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "backends/registry.hpp"
#include "cli/data_paths.hpp"
#include "cli/device_profile.hpp"
#include "cli/script_options.hpp"
#include "cli/subcommands.hpp"
#include "core/cost/cost_model.hpp"
#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "core/parallel/plan.hpp"
#include "core/report/report.hpp"
#include "core/report/sections.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {

std::size_t find_step(const std::vector<StackStep>& stack, const std::string& wanted,
                      const std::string& file) {
  if (wanted.empty()) return stack.size() - 1;
  // "+fp8" and "fp8" both name the step "+fp8"; "+baseline" and "baseline" the step "baseline".
  auto bare = [](const std::string& name) {
    const std::string n = to_lower(name);
    return n.rfind('+', 0) == 0 ? n.substr(1) : n;
  };
  const std::string key = to_lower(wanted);
  for (std::size_t i = 0; i < stack.size(); ++i)
    if (to_lower(stack[i].name) == key) return i;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < stack.size(); ++i) {
    if (bare(stack[i].name) == bare(wanted)) return i;
    names.push_back(stack[i].name);
  }
  std::string list;
  for (const auto& n : names) {
    if (!list.empty()) list += ", ";
    list += n;
  }
  throw ConfigError(fmt::format("{} has no stack step '{}'{}; steps: {}", file, wanted,
                                did_you_mean(wanted, names), list));
}

Hardware choose_hardware(const ExplainArgs& a, const Scenario& s) {
  if (!a.profile.empty() && a.profile != datasheet_profile) return load_profile(a.profile, a.module_path);
  if (!a.hardware.empty()) return find_hardware(a.hardware, a.module_path);
  if (a.backend != "none") {
    const auto backend = make_backend(a.backend);
    return resolve_device_profile(backend->device(), a.profile, a.module_path).hardware;
  }
  if (s.hardware.empty())
    throw ConfigError(fmt::format("{} lists no hardware; pass --hardware NAME", a.scenario));
  return s.hardware.front();
}

}  // namespace

void add_explain_options(CLI::App& cmd, ExplainArgs& a) {
  cmd.add_option("scenario", a.scenario, "Lua scenario")->required()->type_name("SCENARIO");
  cmd.add_option("--step", a.step, "Stack step to explain (default: the last)")->type_name("NAME");
  cmd.add_option("--hardware", a.hardware,
                 "Catalog hardware to price on (default: the backend's device, else the "
                 "scenario's first hardware)")
      ->type_name("NAME");
  cmd.add_option("--stage", a.stage,
                 "Pipeline stage whose rank to show, with its collectives (parallel layouts; "
                 "default 0)")
      ->type_name("N");
  add_script_options(cmd, a, "With a backend, price on its device's profile (nothing is executed)");
  cmd.footer("'perfsim explain SCENARIO --help' also lists the options the script declares.");
}

int cmd_explain(const ExplainArgs& given) {
  // A shipped scenario (scenarios/serve.lua) is found beside an installed binary too.
  ExplainArgs a = given;
  a.scenario = find_data_path(a.scenario);
  const ScriptOutcome outcome = run_script(a.scenario, make_dsl_settings(a));
  if (!outcome.scenario && outcome.points.empty())
    throw ConfigError(fmt::format("{} declares no scenario: explain needs scenario{{...}}",
                                  a.scenario));
  const Scenario& s = outcome.points.empty() ? *outcome.scenario : outcome.points.front().scenario;
  std::string sweep_note;
  if (outcome.points.size() > 1)
    // --set cannot select a point (the sweep still overrides the options it sweeps), so say
    // plainly which point this is.
    sweep_note = fmt::format("first point ({}) of {}; explain prices one point",
                             sweep_label(outcome.points.front().values), outcome.points.size());

  std::vector<StackStep> stack = s.stacks;
  if (stack.empty()) stack.push_back(StackStep{"baseline", {}, ""});
  const std::size_t step = find_step(stack, a.step, a.scenario);
  const Hardware hw = choose_hardware(a, s);

  // A parallel layout shows one rank: the stage asked for, priced on its own timeline.
  ParallelSpec layout = step_parallel(s.parallel, stack, step);
  layout.node_gpus = hw.gpus_per_node;  // hybrid_shard shards within the node it is priced on
  if (a.stage < 0 || a.stage >= layout.pp)
    throw UsageError(fmt::format("--stage {} is outside the layout's pipeline stages 0..{}", a.stage, layout.pp - 1));
  std::string rank_note;
  Graph g;
  if (layout.parallel()) {
    std::vector<RankGraph> ranks = build_rank_graphs(s.model, s.workload, stack, step, layout, 1);
    g = std::move(ranks[static_cast<std::size_t>(a.stage)].graph);
    rank_note = fmt::format("one of {} GPUs ({})", layout.gpus(), describe(layout));
    if (layout.pp > 1)
      rank_note = fmt::format("stage {} of {}: {}; its own timeline, without the pipeline's waits", a.stage,
                              layout.pp, rank_note);
  } else {
    g = build_stack_graph(s.model, s.workload, stack, step, BuildOptions::sampled(1));
  }
  const Prediction p = predict(g, hw);
  ExplainInput in;
  in.scenario = s.name;
  in.step = stack[step].name;
  in.graph = &g;
  in.prediction = &p;
  in.sweep_note = sweep_note;
  in.rank_note = rank_note;
  if (s.serve)
    in.serve_note = "one sequence's decode step at the traffic's mean lengths; the engine's steps batch many "
                    "(perfsim run prices each of them: docs/SERVING.md)";
  const std::string text = format_explain(in);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace perfsim
