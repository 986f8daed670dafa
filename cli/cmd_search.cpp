// `perfsim search SCENARIO --gpus N`: every parallel layout of the scenario's last stack step
// over N GPUs ranked by predicted tokens/s (core/parallel/search.hpp), printed or written.
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/data_paths.hpp"
#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "cli/script_options.hpp"
#include "cli/subcommands.hpp"
#include "core/errors.hpp"
#include "core/parallel/search.hpp"
#include "core/report/report.hpp"
#include "core/report/serve_search.hpp"
#include "core/run/results.hpp"
#include "core/run/serve_runner.hpp"
#include "core/serve/layout_search.hpp"
#include "core/serve/scheduler_config.hpp"
#include "core/serve/traffic.hpp"
#include "dsl/dsl.hpp"

namespace perfsim {

namespace {

// --profile, else --hardware, else the scenario's first hardware.
Hardware search_hardware(const SearchArgs& a, const Scenario& s) {
  if (!a.profile.empty() && !a.hardware.empty())
    throw UsageError("search: give --hardware or --profile, not both");
  if (!a.profile.empty()) return load_profile(a.profile, a.module_path);
  if (!a.hardware.empty()) return find_hardware(a.hardware, a.module_path);
  if (s.hardware.empty())
    throw ConfigError(fmt::format("{} lists no hardware; pass --hardware NAME", a.scenario));
  return s.hardware.front();
}

// Prints or writes a report.
void emit(const SearchArgs& a, ReportFormat format, const std::string& text, std::size_t rows, const char* what) {
  if (a.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else {
    write_file_atomically(a.output, text);
    fmt::print(stderr, "perfsim: wrote {} ({}, {} {})\n", a.output, name_of(format), rows, what);
  }
}

// The options that shape a training or inference step's layout, which a service has no use for.
void refuse_training_options(const SearchArgs& a) {
  const std::pair<bool, const char*> given[] = {
      {!a.micro_batch.empty(), "--micro-batch"}, {!a.zero.empty(), "--zero"},
      {!a.interleave.empty(), "--interleave"},   {!a.ep.empty(), "--ep"},
      {a.cp, "--cp"},                            {a.recompute, "--recompute"},
      {a.uneven_pp, "--uneven-pp"},              {a.global_batch != 0, "--global-batch"}};
  for (const auto& [set, name] : given)
    if (set)
      throw UsageError(fmt::format("{} does not apply to a serve{{}} scenario: its search tries engines (--tp, --pp), "
                                   "replicas, prefill/decode splits and scheduler knobs; drop {}",
                                   name, name));
}

// `perfsim search` on a serve{} scenario: the serving layouts of --gpus GPUs
// (core/serve/layout_search.hpp).
int search_serving(const SearchArgs& a, const Scenario& s, ReportFormat format, const std::string& note) {
  refuse_training_options(a);
  const ServeSpec& spec = *s.serve;
  std::vector<StackStep> stack = s.stacks;
  if (stack.empty()) stack.push_back(StackStep{"baseline", {}, ""});
  const std::size_t step = stack.size() - 1;
  const SchedulerConfig scheduler = scheduler_config(stack, step);
  // The step's own service: its replicas, or its prefill and decode engines, of tp × pp GPUs.
  const ParallelSpec own = step_parallel(s.parallel, stack, step);
  const int own_gpus = (scheduler.disaggregated() ? scheduler.prefill_engines + scheduler.decode_engines : own.dp) *
                       own.tp * own.pp;
  ServeSearchSpace space;
  space.gpus = a.gpus > 0 ? a.gpus : own_gpus;
  if (a.gpus == 0 && own_gpus == 1)
    throw UsageError(fmt::format("search needs --gpus N: {} serves its last step on a single GPU", a.scenario));
  space.tp = a.tp;
  space.pp = a.pp;
  space.threads = a.threads;
  const Hardware hw = search_hardware(a, s);
  std::vector<Request> requests;
  try {
    requests = make_requests(spec, s.model.max_seq);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}{}", spec.where, e.what()));
  }

  ProgressLine line("search", progress_enabled(a.quiet));
  if (line.enabled())
    space.progress = [&line](std::size_t done, std::size_t total) {
      line.update(fmt::format("{} of {} services predicted", done, total),
                  static_cast<double>(done) / static_cast<double>(total));
    };
  const ServeSearchResult result = search_serving_layouts(s.model, hw, spec, requests, stack, space);
  line.clear();
  if (const std::string failure = serve_search_failure(result); !failure.empty()) throw ConfigError(failure);

  ServeSearchReportInput in;
  in.scenario = s.name;
  in.file = s.file.empty() ? a.scenario : s.file;
  in.result = &result;
  in.top = a.top;
  in.note = note;
  in.traffic = describe(spec);
  in.scheduler = describe(scheduler, s.model.max_seq);
  in.step = fmt::format("{} (the last of {} stack step{}; its layout, max_batch and chunked_prefill searched)",
                        stack[step].name, stack.size(), stack.size() == 1 ? "" : "s");
  const std::string text = format == ReportFormat::json  ? format_serve_search_json(in)
                           : format == ReportFormat::csv ? format_serve_search_csv(in)
                                                         : format_serve_search_table(in);
  emit(a, format, text, result.candidates.size(), "services");
  return 0;
}

}  // namespace

void add_search_options(CLI::App& cmd, SearchArgs& a) {
  cmd.add_option("scenario", a.scenario, "Lua scenario (its last stack step is searched)")
      ->required()
      ->type_name("SCENARIO");
  cmd.add_option("--gpus", a.gpus, "GPUs every layout spans, dp · tp · pp · cp (default: the scenario's layout)")
      ->type_name("N")
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--top", a.top, "Layouts shown in the table (JSON and CSV carry every one)")
      ->type_name("N")
      ->capture_default_str();
  cmd.add_option("--hardware", a.hardware, "Catalog hardware to price on (default: the scenario's first hardware)")
      ->type_name("NAME");
  cmd.add_option("--profile", a.profile,
                 "Price on a profile instead: a name in 'perfsim list profiles' or a file written by "
                 "'perfsim calibrate'")
      ->type_name("NAME|FILE");
  cmd.add_option("--global-batch", a.global_batch,
                 "Sequences per optimizer step, kept for every layout (default: the scenario's batch · "
                 "grad_accum · dp)")
      ->type_name("N");
  cmd.add_option("--micro-batch", a.micro_batch, "Micro-batch sizes to try (default: 1,2,4,8 and the scenario's batch)")
      ->type_name("LIST")
      ->delimiter(',');
  cmd.add_option("--tp", a.tp, "Tensor-parallel degrees to try (default: powers of two up to the GPUs of a node)")
      ->type_name("LIST")
      ->delimiter(',');
  cmd.add_option("--pp", a.pp, "Pipeline degrees to try (default: divisors of --gpus up to the layers; serving: 1,2,4)")
      ->type_name("LIST")
      ->delimiter(',');
  cmd.add_option("--zero", a.zero, "ZeRO stages to try (default: 0,1,2,3; 3 is FSDP's full_shard)")
      ->type_name("LIST")
      ->delimiter(',');
  cmd.add_option("--interleave", a.interleave, "Model chunks per pipeline stage to try (default: 1,2,4)")
      ->type_name("LIST")
      ->delimiter(',');
  cmd.add_option("--ep", a.ep,
                 "Expert-parallel degrees to try, each dividing dp (default: a mixture-of-experts model's "
                 "powers of two up to its experts; 1 otherwise)")
      ->type_name("LIST")
      ->delimiter(',');
  cmd.add_flag("--recompute", a.recompute,
               "Also try every layout with full activation recompute (the stack's own recompute is "
               "searched, not assumed)");
  cmd.add_flag("--cp", a.cp, "Also try context parallelism (powers of two up to 16 that split the sequence in 2·cp)");
  cmd.add_flag("--uneven-pp", a.uneven_pp, "Keep pipelines whose stages hold unequal layer counts (pruned by default)");
  cmd.add_option("--format", a.format, "Output format (default: from -o's extension, else table)")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  cmd.add_option("-o,--output", a.output,
                 "Write the result to FILE (whole or not at all); JSON and CSV list every priced layout")
      ->type_name("FILE");
  cmd.add_option("--threads", a.threads, "Worker threads (default: the machine's cores)")
      ->type_name("N")
      ->check(CLI::Range(1, 4096));
  cmd.add_flag("-q,--quiet", a.quiet, "No progress line on stderr");
  cmd.add_option("--set", a.sets, "Override a script option: --set NAME=VALUE (repeatable)")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false)
      ->check(CLI::Validator(check_set, "", "set"));
  cmd.add_option("--module-path", a.module_path,
                 "Directory searched first by require() (before $PERFSIM_PATH and the stdlib)")
      ->type_name("DIR");
  add_sandbox_options(cmd, a);
  cmd.footer(
      "Prediction only: each layout's ranks are built with one transformer layer and priced; docs/CLI.md "
      "(perfsim search) states the space, the pruning and the limiter. A serve{} scenario is searched for serving "
      "layouts instead (engines of --tp x --pp GPUs as replicas or prefill/decode splits, max_batch, "
      "chunked_prefill): docs/SERVING.md (Layout search).");
}

int cmd_search(const SearchArgs& given) {
  // A shipped scenario (scenarios/serve.lua) is found beside an installed binary too.
  SearchArgs a = given;
  a.scenario = find_data_path(a.scenario);
  const ReportFormat format = resolve_report_format(a.format, a.output);
  if (format == ReportFormat::markdown)
    throw UsageError("search writes table, json or csv; choose --format table, json or csv");
  if (a.top < 1) throw UsageError(fmt::format("--top must be >= 1 (got {})", a.top));
  if (a.gpus < 0) throw UsageError(fmt::format("--gpus must be >= 1 (got {})", a.gpus));
  if (!a.output.empty()) check_writable(a.output);

  const ScriptOutcome outcome = run_script(a.scenario, make_dsl_settings(a));
  if (!outcome.scenario && outcome.points.empty())
    throw ConfigError(fmt::format("{} declares no scenario: search needs scenario{{...}}", a.scenario));
  const Scenario& s = outcome.points.empty() ? *outcome.scenario : outcome.points.front().scenario;
  std::string note;
  if (outcome.points.size() > 1)
    note = fmt::format("first point ({}) of {} of the sweep; search prices one point",
                       sweep_label(outcome.points.front().values), outcome.points.size());

  if (s.serve) return search_serving(a, s, format, note);
  if (s.model.image_model())
    throw UsageError(fmt::format("search lays a transformer out over GPUs; {} runs image model '{}', which is laid "
                                 "out by data parallelism only: run it with parallel = {{dp = N}} (or a dp step)",
                                 a.scenario, s.model.name));

  std::vector<StackStep> stack = s.stacks;
  if (stack.empty()) stack.push_back(StackStep{"baseline", {}, ""});
  const std::size_t step = stack.size() - 1;
  const ParallelSpec layout = step_parallel(s.parallel, stack, step);
  SearchSpace space;
  space.gpus = a.gpus > 0 ? a.gpus : layout.gpus();
  if (a.gpus == 0 && layout.gpus() == 1)
    throw UsageError(fmt::format("search needs --gpus N: {} lays its step out on a single GPU (no parallel.gpus)",
                                 a.scenario));
  space.tp = a.tp;
  space.pp = a.pp;
  space.zero = a.zero;
  space.interleave = a.interleave;
  space.ep = a.ep;
  space.micro_batches = a.micro_batch;
  space.global_batch = a.global_batch;
  space.search_cp = a.cp;
  space.search_recompute = a.recompute;
  space.uneven_pp = a.uneven_pp;
  space.threads = a.threads;
  const Hardware hw = search_hardware(a, s);

  ProgressLine line("search", progress_enabled(a.quiet));
  if (line.enabled())
    space.progress = [&line](std::size_t priced, std::size_t total) {
      line.update(fmt::format("{} of {} layouts priced", priced, total),
                  static_cast<double>(priced) / static_cast<double>(total));
    };
  const SearchResult result = search_layouts(s.model, s.workload, stack, step, layout, hw, space);
  line.clear();
  if (const std::string failure = search_failure(result); !failure.empty()) throw ConfigError(failure);

  SearchReportInput in;
  in.scenario = s.name;
  in.file = s.file.empty() ? a.scenario : s.file;
  in.result = &result;
  in.top = a.top;
  in.note = note;
  in.step = fmt::format("{} (the last of {} stack step{}, every pass up to it applied)", stack[step].name,
                        stack.size(), stack.size() == 1 ? "" : "s");
  // The stack's own recompute, as its passes set it up to the searched step.
  std::string own = "none";
  for (std::size_t i = 0; i <= step; ++i)
    for (const PassSpec& p : stack[i].passes)
      if (p.name == "recompute") own = p.text && *p.text == "selective" ? "selective" : "full";
  in.recompute = a.recompute ? fmt::format("every layout priced with and without full recompute (--recompute){}",
                                           own == "none" ? "" : fmt::format("; the stack's own ({}) dropped", own))
                             : fmt::format("{}, as the stack sets it, for every layout (--recompute prices each layout "
                                           "with and without full recompute)",
                                           own);
  const std::string text = format == ReportFormat::json  ? format_search_json(in)
                           : format == ReportFormat::csv ? format_search_csv(in)
                                                         : format_search_table(in);
  emit(a, format, text, result.layouts.size(), "layouts");
  return 0;
}

}  // namespace perfsim
