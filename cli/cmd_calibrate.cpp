// `perfsim calibrate`: runs the calibration sweeps on a backend (core/calibrate/calibrate.hpp), shows
// progress on stderr, writes the fitted profile as Lua (whole or not at all) and prints a
// summary of what was fitted.
#include "cli/cmd_calibrate.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/registry.hpp"
#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "cli/subcommands.hpp"
#include "core/calibrate/calibrate.hpp"
#include "core/calibrate/merge.hpp"
#include "core/errors.hpp"
#include "core/files.hpp"
#include "core/report/report.hpp"
#include "core/text.hpp"
#include "dsl/dsl.hpp"

namespace perfsim {

namespace {

std::string summary(const CalibrateResult& r, const std::string& output) {
  const Hardware& hw = r.hw;
  const Provenance& m = hw.calibration.measured_on;
  std::string s = fmt::format("calibrated {} on {} ({} backend, base {}), {} mode, {:.1f} s\n", hw.name, m.device,
                              m.backend, hw.base, m.mode, r.wall_seconds);
  std::size_t width = std::string("sweep").size();
  for (const SweepSummary& w : r.sweeps) width = std::max(width, w.sweep.size());
  s += fmt::format("{:<{}} {:>6} {:>9}  {}\n", "sweep", width, "graphs", "time", "fitted");
  for (const SweepSummary& w : r.sweeps)
    s += fmt::format("{:<{}} {:>6} {:>9}  {}\n", w.sweep, width, w.graphs, format_duration(w.seconds), w.fitted);
  std::string cells;
  for (const auto& [t, table] : hw.calibration.gemm)
    cells += fmt::format("{}{} {}", cells.empty() ? "" : ", ", name_of(t), table.efficiency.size());
  s += fmt::format("tables: gemm cells {}; {} kernel curves; {} collective fits\n", cells.empty() ? "none" : cells,
                   hw.calibration.kernels.size(), hw.calibration.collectives.size());
  s += fmt::format("launch: eager {}, graph {}", format_duration(hw.launch_eager), format_duration(hw.launch_graph));
  if (hw.pcie.bandwidth > 0)
    s += fmt::format("; host link {:.1f} GB/s + {}", hw.pcie.bandwidth / 1e9, format_duration(hw.pcie.latency));
  if (hw.pcie.bandwidth > 0 && hw.host_copy_bandwidth > 0) s += fmt::format("; pageable staging {:.1f} GB/s", hw.host_copy_bandwidth / 1e9);
  s += fmt::format("\nprofile: {}\n", output);
  return s;
}

std::string read_points_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw ConfigError(fmt::format("{}: cannot read the points file", path));
  return read_regular_file(path, "points file");  // a FIFO or device is refused, not read
}

// --merge: the profile fitted again from saved points; nothing is measured.
int merge_points(const CalibrateArgs& a) {
  if (a.profile.empty())
    throw UsageError("calibrate --merge needs --profile NAME|FILE: the profile the points refine");
  if (a.quick || !a.points.empty() || a.backend != "auto")
    throw UsageError("calibrate --merge measures nothing: --quick, --points and --backend do not apply");
  check_writable(a.output);
  Hardware base = load_profile(a.profile, a.module_path);
  if (!base.calibrated)
    throw ConfigError(fmt::format("calibrate --merge: profile '{}' is not calibrated: merge points into a profile "
                                  "written by 'perfsim calibrate' (its launch and host figures are kept)",
                                  a.profile));
  std::vector<std::vector<SavedPoint>> files;
  for (const std::string& path : a.merge) files.push_back(read_points_csv(read_points_file(path), path));
  if (!a.name.empty()) base.name = a.name;
  MergeSummary m;
  const Hardware hw = merge_calibrations(base, std::move(files), m);
  write_file_atomically(a.output, profile_to_lua(hw));
  std::string text = fmt::format("merged {} points files ({} points) into {} (over profile '{}')\n", m.files,
                                 m.points, hw.name, a.profile);
  text += fmt::format("kernel curves: {} fitted from the pooled points, {} kept from the profile\n", m.curves,
                      m.kept_curves);
  text += fmt::format("gemm cells: {} set to the median of the files that measured them, {} filled from those\n",
                      m.cells, m.filled);
  std::vector<std::string> updates;
  if (const std::size_t n = m.updated.rekeyed; n > 0)
    updates.push_back(fmt::format("{} one-sequence cop{} given the contiguous-copy curve", n, n == 1 ? "y" : "ies"));
  if (const std::size_t n = m.updated.cross_entropy; n > 0)
    updates.push_back(fmt::format("{} cross-entrop{} given the curve of {} kernel path", n, n == 1 ? "y" : "ies",
                                  n == 1 ? "its" : "their"));
  if (const std::size_t n = m.updated.skinny_gemms; n > 0)
    updates.push_back(fmt::format("{} skinny unaligned GEMM{} given {} skinny curve", n, n == 1 ? "" : "s",
                                  n == 1 ? "its" : "their"));
  if (const std::size_t n = m.updated.quantized_rows; n > 0)
    updates.push_back(fmt::format("{} quantized GEMM{} given the curve of {} rows", n, n == 1 ? "" : "s",
                                  n == 1 ? "its" : "their"));
  if (const std::size_t n = m.updated.varlen_rows; n > 0)
    updates.push_back(fmt::format("{} varlen decode attention{} given the curve of {} GQA group", n, n == 1 ? "" : "s",
                                  n == 1 ? "its" : "their"));
  if (const std::size_t n = m.updated.repriced; n > 0)
    updates.push_back(fmt::format("{} embedding{} with each position row counted once", n, n == 1 ? "" : "s"));
  if (!updates.empty())
    text += fmt::format("points of an earlier cost model brought up to date: {}\n", fmt::join(updates, ", "));
  text += fmt::format("profile: {}\n", a.output);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!a.quiet) fmt::print(stderr, "perfsim: wrote {} (profile '{}')\n", a.output, hw.name);
  return 0;
}

}  // namespace

void add_calibrate_options(CLI::App& cmd, CalibrateArgs& a) {
  cmd.add_option("--backend", a.backend, "Device to measure: auto (CUDA when present, else CPU), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd.add_flag("--quick", a.quick, "Coarser sweeps (about a minute on an H100 or H200, seconds on a CPU)");
  cmd.add_option("-o,--output", a.output, "Write the profile to FILE (whole or not at all)")
      ->required()
      ->type_name("FILE");
  cmd.add_option("--points", a.points,
                 "Also write every timed op behind the fit (shape, curve key, roofline and measured "
                 "seconds, efficiency) to FILE as CSV")
      ->type_name("FILE");
  cmd.add_option("--name", a.name, "Profile name (default: the device's catalog entry + \"-local\", lowercased)")
      ->type_name("NAME");
  cmd.add_option("--module-path", a.module_path, "Directory searched first for the hardware catalog")->type_name("DIR");
  cmd.add_option("--merge", a.merge,
                 "Measure nothing: fit the curves and GEMM tables of the --profile again from the points "
                 "of one or more calibrations (files written by --points; repeat the option or list "
                 "several), pooled")
      ->type_name("FILE")
      ->expected(1, -1);
  cmd.add_option("--profile", a.profile,
                 "With --merge: the profile whose other figures (launch, host dispatch, links) the "
                 "result keeps, a name in 'profiles' or a file written by 'perfsim calibrate'")
      ->type_name("NAME|FILE");
  cmd.add_flag("-q,--quiet", a.quiet, "No progress or status lines on stderr");
  cmd.footer("docs/CALIBRATION.md describes the sweeps, the fit and --merge.");
}

int cmd_calibrate(const CalibrateArgs& a) {
  if (!a.merge.empty()) return merge_points(a);
  if (!a.profile.empty()) throw UsageError("calibrate: --profile goes with --merge (a measured calibration starts from the device's catalog entry)");
  check_writable(a.output);
  if (!a.points.empty()) check_writable(a.points);
  const auto backend = make_backend(a.backend);
  const DeviceInfo d = backend->device();
  const Hardware base = find_hardware(d.catalog_name, a.module_path);
  CalibrateOptions o;
  ProgressLine line("calibrate", progress_enabled(a.quiet));
  o.quick = a.quick;
  o.name = a.name;
  if (!a.quiet) {
    // A live counter per sweep (its graphs, its time, what is left of it), kept on screen when
    // the sweep ends.
    if (line.enabled())
      o.progress = [&line](const CalibrateProgress& p) {
        const double fraction = p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(p.total) : 0.0;
        line.update(fmt::format("{} {}/{}", p.sweep, p.done, p.total), fraction, p.sweep_seconds);
        if (p.done == p.total) line.keep();
      };
    fmt::print(stderr, "perfsim: calibrating {} ({} backend, base {}, {} mode)\n", d.name, backend->name(),
               base.name, a.quick ? "quick" : "full");
  }
  const CalibrateResult r = calibrate(*backend, base, o);
  write_file_atomically(a.output, profile_to_lua(r.hw));
  if (!a.points.empty()) write_file_atomically(a.points, points_to_csv(r.points));
  const std::string text = summary(r, a.output);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!a.quiet) fmt::print(stderr, "perfsim: wrote {} (profile '{}')\n", a.output, r.hw.name);
  if (!a.quiet && !a.points.empty())
    fmt::print(stderr, "perfsim: wrote {} ({} measured points)\n", a.points, r.points.size());
  return 0;
}

}  // namespace perfsim
