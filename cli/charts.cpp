// Charts: the report and the directory are checked here, so their errors are perfsim's own one
// line; the drawing is cli/plot/perfsim_plot.py, run as `python3 -` with the script on stdin.
// A python3 on PATH without matplotlib (a virtual environment, pyenv) is passed over for the
// system's /usr/bin/python3, where Debian's python3-matplotlib lives.
#include "cli/charts.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/plot_script.hpp"
#include "cli/python.hpp"
#include "core/errors.hpp"

namespace perfsim {

namespace {

namespace fs = std::filesystem;

// The script's exit status when matplotlib cannot be imported.
constexpr int no_matplotlib = 3;
constexpr const char* install_hint = "install python3-matplotlib (make deps)";

// $PERFSIM_PYTHON alone when set; else python3 on PATH, then the system's.
std::vector<std::string> interpreters() {
  if (const char* chosen = std::getenv("PERFSIM_PYTHON"); chosen != nullptr && *chosen != '\0') return {chosen};
  return {"python3", "/usr/bin/python3"};
}

// The script over `args` on the first interpreter that has matplotlib. Throws ConfigError when
// none does; otherwise returns the script's exit status.
int run_plot_script(const std::vector<std::string>& args) {
  std::vector<std::string> without_matplotlib;
  for (const std::string& python : interpreters()) {
    const int status = run_python(python, plot_script(), args);
    if (status == python_not_found) continue;
    if (status == no_matplotlib) {
      without_matplotlib.push_back(python);
      continue;
    }
    return status;
  }
  const bool env = std::getenv("PERFSIM_PYTHON") != nullptr && *std::getenv("PERFSIM_PYTHON") != '\0';
  if (!without_matplotlib.empty())
    throw ConfigError(fmt::format("charts need matplotlib, which {} cannot import: {}",
                                  without_matplotlib.front(), install_hint));
  throw ConfigError(fmt::format("charts need python3{}: {}",
                                env ? fmt::format(" (PERFSIM_PYTHON={} cannot be started)", interpreters().front())
                                    : ", which is not on PATH",
                                install_hint));
}

// Throws ConfigError unless `report` is a JSON object holding a run's results, a validation or a
// trace (traceEvents).
void check_report(const std::string& report, const std::string& shown) {
  std::error_code ec;
  if (fs::is_directory(report, ec))
    throw ConfigError(fmt::format("{} is a directory; name a JSON report (perfsim run SCENARIO -o r.json)", shown));
  std::ifstream in(report, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("cannot read {}: {}", shown, std::strerror(errno ? errno : ENOENT)));
  std::ostringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded())
    throw ConfigError(fmt::format("{} is not a perfsim JSON report (not JSON); write one with "
                                  "perfsim run SCENARIO -o r.json or perfsim validate -o v.json",
                                  shown));
  if (!doc.is_object() || (!doc.contains("results") && !doc.contains("validate") && !doc.contains("traceEvents")))
    throw ConfigError(fmt::format("{} is not a perfsim JSON report: it holds neither 'results' (perfsim run), "
                                  "'validate' (perfsim validate) nor 'traceEvents' (a trace, --trace FILE)",
                                  shown));
}

// Creates `dir` when missing and proves it writable by creating a file in it: the only test that
// holds for read-only file systems, /proc and ACLs.
void make_dir(const std::string& dir) {
  std::error_code ec;
  if (dir.empty()) throw ConfigError("charts need a directory");
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError(fmt::format("cannot write charts to '{}': it is not a directory", dir));
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError(fmt::format("cannot create the chart directory '{}': {}", dir, ec.message()));
  std::string probe = (fs::path(dir) / ".perfsim-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) throw ConfigError(fmt::format("cannot write charts to '{}': {}", dir, std::strerror(errno)));
  ::close(fd);
  std::remove(probe.c_str());
}

std::vector<std::string> script_args(const std::string& report, const std::string& dir, const ChartOptions& o) {
  std::vector<std::string> args = {report, dir, "--point", std::to_string(o.point), "--dpi", std::to_string(o.dpi)};
  if (!o.step.empty()) args.insert(args.end(), {"--step", o.step});
  if (!o.label.empty()) args.insert(args.end(), {"--label", o.label});
  if (!o.trace.empty()) args.insert(args.end(), {"--trace", o.trace});
  if (o.quiet) args.emplace_back("-q");
  return args;
}

}  // namespace

void check_chart_dir(const std::string& dir) { make_dir(dir); }

void check_chart_tools() {
  const int status = run_plot_script({"-", "-", "--check"});
  if (status != 0) throw ConfigError(fmt::format("charts: the chart script cannot run (exit {})", status));
}

bool draw_charts(const std::string& report, const std::string& dir, const ChartOptions& o) {
  check_report(report, o.label.empty() ? report : o.label);
  make_dir(dir);
  return run_plot_script(script_args(report, dir, o)) == 0;
}

bool draw_charts_of(const std::string& json_text, const std::string& dir, const ChartOptions& o) {
  const fs::path tmp_dir = fs::temp_directory_path();
  std::string path = (tmp_dir / "perfsim-report-XXXXXX.json").string();
  const int fd = ::mkstemps(path.data(), 5);
  if (fd < 0) throw ConfigError(fmt::format("charts: cannot create a temporary file in {}: {}", tmp_dir.string(),
                                            std::strerror(errno)));
  std::FILE* f = ::fdopen(fd, "wb");
  const bool written = f != nullptr && std::fwrite(json_text.data(), 1, json_text.size(), f) == json_text.size();
  const bool closed = f != nullptr ? std::fclose(f) == 0 : ::close(fd) == 0;
  if (!written || !closed) {
    std::remove(path.c_str());
    throw ConfigError(fmt::format("charts: cannot write the temporary report {}", path));
  }
  ChartOptions named = o;
  if (named.label.empty()) named.label = "the report";
  try {
    const bool ok = draw_charts(path, dir, named);
    std::remove(path.c_str());
    return ok;
  } catch (...) {
    std::remove(path.c_str());
    throw;
  }
}

}  // namespace perfsim
