// `perfsim validate`: run the validation suite on a backend and report how far the cost
// model's predictions fall from the measurements (docs/VALIDATION.md).
#pragma once
#include <string>
#include <vector>

#include "core/run/rank_execution.hpp"
#include "core/report/report.hpp"
#include "dsl/dsl.hpp"

namespace CLI {
class App;
}

namespace perfsim {

struct ValidateArgs {
  std::string backend = "auto";                // auto | cpu | cuda
  std::string profile;                         // --profile NAME|FILE; empty: by device
  std::string max_error;                       // --max-error PCT as given; empty: report only
  std::string format;                          // empty: from the -o extension, else table
  std::string output;                          // -o FILE; empty = stdout
  std::string trace;                           // --trace FILE: the suite's timelines (trace-event JSON)
  std::string plots;                           // --plots DIR: the report's charts (cli/charts.hpp)
  std::string suite = "scenarios/validation";  // directory of *.lua scenarios
  std::string module_path;
  bool quick = false;                          // --quick: every scenario gets quick=true
  std::vector<std::string> measurements;       // --measurements FILE...: re-price saved JSON reports
  std::string op_error;                        // --op-error PCT as given (several measurements)
  bool quiet = false;
  bool unsafe = false;                         // --unsafe: no file sandbox for the scenarios
  double timeout = default_script_timeout_s;   // --timeout SECONDS per scenario script; 0 = none
  int gpus = 0;                                // --gpus N: run as N ranks (the multi-GPU suite)
  double rank_timeout = default_rank_timeout_s;  // --rank-timeout SECONDS a rank may spend on one step
  bool published = false;                      // --published: the published-results suite, predicted
};

// The suite a run of several ranks validates when --suite is not given: parallel layouts whose
// ranks each take one GPU (the scenarios' `gpus` option is set to the rank count).
inline constexpr const char* ranks_suite = "scenarios/validation_ranks";

// The suite `--published` predicts when --suite is not given: published measurements to reproduce.
inline constexpr const char* published_suite = "scenarios/published";

// The suite's scenario files: *.lua directly in `dir`, sorted by name. Throws ConfigError
// naming `what` ("validation suite") when `dir` is missing or holds none.
[[nodiscard]] std::vector<std::string> suite_files(const std::string& dir, const std::string& what);

// Registers the command's options on `cmd`, filling `a` when parsed.
void add_validate_options(CLI::App& cmd, ValidateArgs& a);

// --max-error "10" or "10%" as a fraction (0.1). Throws UsageError unless it is a finite
// percentage > 0.
[[nodiscard]] double parse_max_error(const std::string& text);

[[nodiscard]] int cmd_validate(const ValidateArgs& a);

// --published (cli/cmd_validate_published.cpp).
[[nodiscard]] int validate_published(const ValidateArgs& a, ReportFormat format);

}  // namespace perfsim
