#include "cli/host_load.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/text.hpp"

namespace perfsim {

namespace {

struct CpuTimes {
  uint64_t idle = 0, total = 0;
};

// "cpu  user nice system idle iowait irq softirq steal ..." (proc(5)); guest time is already
// inside user and nice, so the fields past steal are not added again.
std::optional<CpuTimes> parse_cpu_line(std::string_view stat) {
  const std::string line(stat.substr(0, stat.find('\n')));
  std::istringstream in(line);
  std::string label;
  in >> label;
  if (label != "cpu") return std::nullopt;
  std::vector<uint64_t> fields;
  uint64_t v = 0;
  while (fields.size() < 8 && in >> v) fields.push_back(v);
  if (fields.size() < 4) return std::nullopt;
  CpuTimes t;
  for (uint64_t f : fields) t.total += f;
  t.idle = fields[3] + (fields.size() > 4 ? fields[4] : 0);
  return t;
}

}  // namespace

std::optional<double> busy_share(std::string_view stat_before, std::string_view stat_after, double own_ticks) {
  const std::optional<CpuTimes> a = parse_cpu_line(stat_before), b = parse_cpu_line(stat_after);
  if (!a || !b || b->total <= a->total || b->idle < a->idle) return std::nullopt;
  const double total = static_cast<double>(b->total - a->total);
  const double idle = static_cast<double>(b->idle - a->idle);
  return std::clamp((total - idle - std::max(0.0, own_ticks)) / total, 0.0, 1.0);
}

std::optional<double> process_ticks(std::string_view self_stat) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields are counted
  // after its last ')'; utime and stime are fields 14 and 15 (proc(5)), the 12th and 13th there.
  const auto close = self_stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::istringstream in{std::string(self_stat.substr(close + 1))};
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 1; i <= 13 && in >> field; ++i) {
    if (i == 12 || i == 13) {
      char* end = nullptr;
      const double v = std::strtod(field.c_str(), &end);
      if (end == field.c_str() || *end != '\0') return std::nullopt;
      (i == 12 ? utime : stime) = v;
      if (i == 13) return utime + stime;
    }
  }
  return std::nullopt;
}

std::optional<double> sample_busy_share(double seconds) {
  const std::optional<std::string> before = read_text_file("/proc/stat");
  const std::optional<std::string> self_before = read_text_file("/proc/self/stat");
  if (!before) return std::nullopt;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const std::optional<std::string> after = read_text_file("/proc/stat");
  const std::optional<std::string> self_after = read_text_file("/proc/self/stat");
  if (!after) return std::nullopt;
  double own = 0;
  if (self_before && self_after) {
    const std::optional<double> t0 = process_ticks(*self_before), t1 = process_ticks(*self_after);
    if (t0 && t1) own = *t1 - *t0;
  }
  return busy_share(*before, *after, own);
}

std::string busy_machine_warning(std::optional<double> share, unsigned cores) {
  if (!share || *share <= busy_machine_share) return "";
  return fmt::format("this machine is busy: other work kept {:.0f}% of its {} core{} busy just before the run; the "
                     "measured times are slower and noisier than the model expects; re-run when it is idle",
                     *share * 100, cores, cores == 1 ? "" : "s");
}

}  // namespace perfsim
