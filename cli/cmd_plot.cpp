// `perfsim plot REPORT.json DIR`: the charts of a report saved by `perfsim run -o r.json` or
// `perfsim validate -o v.json`, or the timeline of a trace (`--trace t.json`), drawn by the
// embedded matplotlib script (cli/charts.hpp).
#include "cli/cmd_plot.hpp"

#include <CLI/CLI.hpp>

#include "cli/charts.hpp"

namespace perfsim {

void add_plot_options(CLI::App& cmd, PlotArgs& a) {
  cmd.add_option("report", a.report,
                 "JSON report written by 'perfsim run ... -o r.json' or "
                 "'perfsim validate ... -o v.json', or a trace ('--trace t.json')")
      ->required()
      ->type_name("REPORT.json");
  cmd.add_option("dir", a.dir,
                 "Directory the charts go to (created when missing; a chart of the "
                 "same name is replaced)")
      ->required()
      ->type_name("DIR");
  cmd.add_option("--step", a.step,
                 "Stack step the roofline and per-rank charts show (default: the last measured step, "
                 "else the last); of a trace, the step the timeline shows (default: the first step "
                 "executed on ranks, else the first)")
      ->type_name("NAME");
  cmd.add_option("--point", a.point, "Sweep point the per-step charts show, 1 for the first")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--dpi", a.dpi, "Resolution of the PNG files")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(20, 600));
  cmd.add_flag("-q,--quiet", a.quiet, "No notes on stderr (charts skipped and why, what was written)");
  cmd.footer(
      "Charts, each drawn when the report holds its data (the others are named on stderr with the reason):\n"
      "  roofline    one step's ops on the device's roofline (peak FLOP/s, memory bandwidth),\n"
      "              at their predicted and measured times\n"
      "  stack       step time per optimization step as a waterfall, and the speedup, predicted\n"
      "              and measured\n"
      "  memory      peak memory per step by role (weights, gradients, optimizer states, KV cache,\n"
      "              activations, workspace, ...)\n"
      "  op_classes  time per op class per step, predicted vs measured\n"
      "  scaling     tokens/s and scaling efficiency vs GPUs, when the steps or sweep points span\n"
      "              several GPU counts (a sweep over gpus)\n"
      "  ranks       step time and exposed communication per rank (per pipeline stage when\n"
      "              predicted only), for a step over several GPUs\n"
      "  validation  a validation report: predicted vs measured time per op, log-log, with\n"
      "              the ±10% and ±25% bands\n"
      "  timeline    a trace (--trace t.json): one step's spans, a lane per track of its predicted,\n"
      "              measured and per-rank processes, coloured by forward, backward, optimizer,\n"
      "              pipeline transfer and collective\n"
      "  serve_latency_cdf  serving: CDFs of TTFT and E2E per stack step\n"
      "  serve_percentiles  serving: p50 and p99 TTFT, TPOT and E2E per stack step\n"
      "  serve_timeline     serving: batch size and KV blocks used over the run, per step\n"
      "  serve_load         serving, a sweep over rate (or users): p50/p99 TTFT and TPOT and the\n"
      "                     requests served against the offered load (the latency-throughput curve)\n"
      "  serve_step_error   serving, executed steps: each engine step's price against its measured\n"
      "                     time, decode-only and with prefill (measured runs are drawn beside the\n"
      "                     predicted ones in the other serving charts)\n"
      "  serve_engines      serving with several engines (replicas, or prefill and decode\n"
      "                     engines): requests, output tokens/s, TTFT and TPOT p50 of each engine\n"
      "  serve_kv_transfer  disaggregated serving: the CDF of each prompt's KV transfer time\n"
      "  serve_speculative  speculative decoding: the tokens a verify pass yielded against\n"
      "                     (1 - a^(k+1)) / (1 - a), and each step's TPOT p50\n"
      "Files: DIR/NAME.svg and DIR/NAME.png; written together or not at all. Needs python3 with\n"
      "matplotlib (Debian: python3-matplotlib, installed by make deps; PERFSIM_PYTHON picks the\n"
      "interpreter). docs/LOOKING_AT_A_RUN.md shows each chart and how to read it.");
}

int cmd_plot(const PlotArgs& a) {
  ChartOptions o;
  o.step = a.step;
  o.point = a.point;
  o.dpi = a.dpi;
  o.quiet = a.quiet;
  return draw_charts(a.report, a.dir, o) ? 0 : 1;
}

}  // namespace perfsim
