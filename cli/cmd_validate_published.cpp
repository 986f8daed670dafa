// `perfsim validate --published`: the published-results suite, predicted only. Every scenario
// of the suite carries `published = {...}`; it is priced on its own hardware (the catalog's
// datasheet entry, or --profile for every case) and its last stack step compared with the
// published figure.
#include <fmt/format.h>

#include <cstdio>

#include "cli/cmd_validate.hpp"
#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "cli/subcommands.hpp"
#include "core/errors.hpp"
#include "core/files.hpp"
#include "core/report/published.hpp"
#include "core/run/runner.hpp"
#include "core/validate/published.hpp"
#include "dsl/dsl.hpp"

namespace perfsim {


int validate_published(const ValidateArgs& a, ReportFormat format) {
  if (!a.measurements.empty() || !a.trace.empty() || !a.plots.empty() || a.quick)
    throw UsageError("--published predicts published configurations: drop --measurements, --trace, --plots and --quick");
  if (a.backend != ValidateArgs{}.backend)
    throw UsageError("--published executes nothing (the configurations need up to thousands of GPUs): drop --backend");
  const std::string& dir = a.suite;  // cmd_validate resolved the default (published_suite)
  const std::vector<std::string> files = suite_files(dir, "published suite");
  std::optional<Hardware> profile;
  if (!a.profile.empty()) profile = load_profile(a.profile, a.module_path);

  DslSettings settings;
  settings.module_path = a.module_path;
  settings.unsafe = a.unsafe;
  settings.timeout_s = a.timeout;
  settings.readable_paths.push_back(dir);
  ProgressLine line("validate --published", progress_enabled(a.quiet));
  std::vector<PublishedCase> cases;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& file = files[i];
    line.update(fmt::format("[{}/{}] {}", i + 1, files.size(), file),
                static_cast<double>(i) / static_cast<double>(files.size()));
    const ScriptOutcome outcome = run_script(file, settings);
    if (!outcome.scenario) throw ConfigError(fmt::format("{}: declares no scenario", file));
    if (!outcome.scenario->sweep.empty())
      throw ConfigError(fmt::format("{}: a published case is one configuration; drop its sweep", file));
    Scenario s = *outcome.scenario;
    if (!s.published)
      throw ConfigError(fmt::format("{}: no published = {{source, citation, metric, value}}: every scenario of "
                                    "the published suite carries the figure it reproduces",
                                    file));
    if (profile) s.hardware.front() = *profile;
    const Hardware& hw = s.hardware.front();
    const RunResult r = run_scenario(s, nullptr, &hw);
    try {
      const std::string described = hw.calibrated ? "calibrated, " + hw.name : "datasheet, uncalibrated";
      cases.push_back(published_case(r, *s.published, hw.base.empty() ? hw.name : hw.base, described));
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}: {}", file, e.what()));
    }
  }
  line.clear();
  const PublishedSummary summary = summarize_published(std::move(cases));
  const std::string text = format_published(summary, format);
  if (a.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else {
    write_file_atomically(a.output, text);
    if (!a.quiet) fmt::print(stderr, "perfsim: validate: wrote {} ({})\n", a.output, name_of(format));
  }
  if (!a.max_error.empty() && summary.max_abs_error > parse_max_error(a.max_error)) {
    if (!a.quiet)
      fmt::print(stderr, "perfsim: validate: a published case is over --max-error {}: max |error| {:.1f}%\n",
                 a.max_error, 100 * summary.max_abs_error);
    return 1;
  }
  return 0;
}

}  // namespace perfsim
