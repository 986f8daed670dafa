// Report printers: RunResult -> text (aligned table, markdown, JSON, CSV) and the `explain`
// per-op roofline table. Pure functions that build strings; callers do the I/O.
// Every derived figure (errors, speedups, tokens/s) comes from step_figures() so all formats
// print the same numbers; the definitions live in docs/COST_MODEL.md and docs/CLI.md.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cost/cost_model.hpp"
#include "core/graph/graph.hpp"
#include "core/run/results.hpp"
#include "core/units.hpp"

namespace perfsim {

enum class ReportFormat { table, markdown, json, csv };

// "table", "md" / "markdown", "json", "csv" (case-insensitive).
[[nodiscard]] std::optional<ReportFormat> parse_report_format(std::string_view s);
// By file extension: .json, .csv, .md / .markdown, .txt (table); nullopt otherwise.
[[nodiscard]] std::optional<ReportFormat> report_format_for_path(std::string_view path);
[[nodiscard]] std::string_view name_of(ReportFormat f);

// What a parallel layout adds to a step's figures (LayoutPrediction, summed up).
struct LayoutFigures {
  std::string layout;                     // describe(ParallelSpec): "tp=8 pp=4 dp=16 sp zero=1 1f1b"
  int gpus = 1;
  int pp = 1;                             // pipeline stages
  int micro_batches = 1;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0, hfu = 0;                // over every GPU
  double bubble_fraction = 0;             // of the step (pipeline)
  double communication = 0;               // seconds of collectives on the most communicating rank
  double exposed_communication = 0;       // the part of them the step waits for
  std::map<std::string, double> exposed_by_kind;  // collective name -> seconds the step would lose without it
  int worst_rank = 0;                     // pipeline stage with the highest memory peak
  double memory_worst = 0, memory_least = 0;  // bytes per rank: highest and lowest peak
  std::string does_not_fit;               // "stage 2 needs 91.3 GiB of 80.0 GiB"
  // Uneven pipeline stages: "21 layers on stages 0-1, 20 on stages 2-3 (uneven)"; "" when even.
  std::string stages;
  // When it does not fit: the layouts of the same GPUs that do, best first (LayoutPrediction);
  // fit_searched false when none were searched for.
  bool fit_searched = false;
  std::vector<FittingLayout> layouts_that_fit;
};

// "fits: tp=8 pp=2 dp=4 zero=1 1f1b (1,234 tok/s/GPU), ..." or "no layout of 16 GPUs fits" for a
// layout that does not fit (a training layout's micro-batch shown, "mb=2", where it differs from
// the step's); "" when nothing was searched.
[[nodiscard]] std::string fitting_layouts_text(const LayoutFigures& l, const Workload& step_workload);
// For a single-GPU step that does not fit: "fits on 4 GPUs: tp=4 (…), …", "no layout of up to
// 1,024 GPUs fits", or "" when nothing was searched.
[[nodiscard]] std::string fitting_gpus_text(const StepResult& s);

// The figures of one stack step, derived once for every format. Measured values are empty
// when the step was not executed; errors are empty when either side is missing.
struct StepFigures {
  std::string step;
  double tokens_per_step = 0;                  // graph workload (after batching passes)
  double predicted_time = 0;                   // seconds, full model
  std::optional<double> measured_time;         // seconds, full model (scaled from sampled layers)
  std::optional<double> time_error;            // (predicted − measured) / measured
  double predicted_peak_executed = 0;          // bytes, the graph as built
  std::optional<double> measured_peak;         // bytes, allocator high-water mark of that graph
  std::optional<double> memory_error;
  double predicted_peak_model = 0;             // bytes, whole model
  double predicted_workspace = 0;              // bytes of kernel/library workspace in the executed peak
  std::optional<double> measured_workspace;    // the same at the measured peak
  double host_bytes = 0;                       // bytes in host memory (not in the peaks)
  double host_pinned_bytes = 0;                // the page-locked part of host_bytes
  bool fits = true;
  double predicted_speedup = 1;                // throughput vs the first step, same hardware
  std::optional<double> measured_speedup;      // needs the first step measured too
  double predicted_tokens_per_s = 0;
  std::optional<double> measured_tokens_per_s;
  // Model FLOP utilisation over every GPU of a layout, and the model FLOPs per second per GPU
  // behind it (docs/COST_MODEL.md §4); measured: the same FLOPs over the measured step.
  double predicted_mfu = 0;
  double predicted_model_flops_per_gpu = 0;    // FLOP/s
  std::optional<double> measured_mfu;
  std::optional<double> measured_model_flops_per_gpu;
  std::string note;                            // "not executed: ..." / unsupported dtypes
  std::optional<LayoutFigures> layout;         // a parallel layout's figures (predicted)
};

// What-if figures of one step on one other hardware of the scenario.
struct WhatIfFigures {
  std::string hardware;
  std::string step;
  double step_time = 0;
  double tokens_per_s = 0;
  double speedup = 1;          // vs the first step on the same hardware
  double peak_model = 0;       // bytes, whole model
  bool fits = true;
  double mfu = 0;
  std::vector<std::string> unsupported;
  std::string note;            // unsupported dtypes and what they were priced at
  std::optional<LayoutFigures> layout;
};

// "A100-80GB has no fp8: priced at bf16", or "" when the hardware has every dtype.
[[nodiscard]] std::string unsupported_note(const Prediction& p);

[[nodiscard]] LayoutFigures layout_figures(const LayoutPrediction& lp);
[[nodiscard]] std::vector<StepFigures> step_figures(const RunResult& r);
// Ordered by hardware (in scenario order), then by step.
[[nodiscard]] std::vector<WhatIfFigures> what_if_figures(const RunResult& r);

// The spread of a measured step's timed repeats: (median − fastest) / median of its op time
// sum, with every op at its median repeat and at its fastest; nullopt without a measurement of
// two or more repeats. A quiet machine gives a few percent.
[[nodiscard]] std::optional<double> repeat_spread(const StepResult& s);
// A spread above this makes the run warn: a step error of that size could be noise.
inline constexpr double large_repeat_spread = 0.10;
// One line each (no "warning:" prefix) about the measurements of `points` that should not be
// taken at face value: repeats that varied by more than large_repeat_spread. Empty when none.
[[nodiscard]] std::vector<std::string> measurement_warnings(const std::vector<RunResult>& points);

// All sweep points of one run in the chosen format. A single point prints without a sweep
// summary; several points add one (text formats) or one row/object per point (csv/json).
[[nodiscard]] std::string format_report(const std::vector<RunResult>& points, ReportFormat f);
[[nodiscard]] std::string format_table(const std::vector<RunResult>& points);
[[nodiscard]] std::string format_markdown(const std::vector<RunResult>& points);
[[nodiscard]] std::string format_json(const std::vector<RunResult>& points);
[[nodiscard]] std::string format_csv(const std::vector<RunResult>& points);
// Which engine run of a serve step: the prediction, or the executed run (ServeStepResult::executed).
enum class ServeRun { predicted, measured };
// Serve step `step` of `r` as `vllm bench serve --save-result` writes a run (vllm_bench.cpp).
// `spec`, the traffic the run served, gives the exact request rate, burstiness and whether an
// SLO was set; without it they are read from RunResult::traffic. Throws std::out_of_range when
// `r` has no such serve step, std::invalid_argument for the measured run of a step that did not
// execute.
[[nodiscard]] std::string format_vllm_bench_json(const RunResult& r, std::size_t step, const ServeSpec* spec = nullptr,
                                                 ServeRun which = ServeRun::predicted);

// `perfsim explain`: one stack step's graph priced on one hardware, op by op.
struct ExplainInput {
  std::string scenario;        // name
  std::string step;            // stack step shown
  const Graph* graph = nullptr;
  const Prediction* prediction = nullptr;
  std::string sweep_note;      // e.g. "sweep point batch=1 of 7" (empty without a sweep)
  std::string rank_note;       // parallel layouts: which rank the graph is ("stage 1 of 4 of tp=8 pp=4 dp=16")
  std::string serve_note;      // serving scenarios: what the step shown stands for
};
[[nodiscard]] std::string format_explain(const ExplainInput& in);

// `perfsim search`: the layouts search_layouts ranked (core/parallel/search.hpp), printed by
// core/report/search.cpp. The table shows the `top` best and the pruned counts; JSON and CSV
// carry every priced layout.
struct SearchResult;
struct SearchReportInput {
  std::string scenario;        // name
  std::string file;            // script
  const SearchResult* result = nullptr;
  int top = 10;
  std::string note;            // e.g. "first point (batch=1) of 3 of the sweep" ("" when none)
  std::string step;            // the stack step searched, as the header says it ("" when not said)
  std::string recompute;       // what the search does about activation recompute ("" when not said)
};
[[nodiscard]] std::string format_search_table(const SearchReportInput& in);
[[nodiscard]] std::string format_search_json(const SearchReportInput& in);
[[nodiscard]] std::string format_search_csv(const SearchReportInput& in);
// "no layout of 7 GPUs fits memory on H100-SXM: ..." when none of `r`'s layouts fits; "" otherwise.
[[nodiscard]] std::string search_failure(const SearchResult& r);

}  // namespace perfsim
