// `perfsim search SCENARIO --gpus N`: every parallel layout of the scenario's last stack step
// over N GPUs ranked by predicted tokens/s (core/parallel/search.hpp), printed or written.
#include <cstdio>

#include <fmt/format.h>

#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "cli/subcommands.hpp"
#include "core/errors.hpp"
#include "core/parallel/search.hpp"
#include "core/report/report.hpp"
#include "core/run/results.hpp"
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

}  // namespace

int cmd_search(const SearchArgs& a) {
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
  const std::string text = format == ReportFormat::json  ? format_search_json(in)
                           : format == ReportFormat::csv ? format_search_csv(in)
                                                         : format_search_table(in);
  if (a.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else {
    write_file_atomically(a.output, text);
    fmt::print(stderr, "perfsim: wrote {} ({}, {} layouts)\n", a.output, name_of(format), result.layouts.size());
  }
  return 0;
}

}  // namespace perfsim
