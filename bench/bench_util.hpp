// What every benchmark program shares: a clock, medians, and the CPU it ran on.
#pragma once
#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

namespace perfsim::bench {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// The middle value (the upper one of an even count); the list must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// "model name" of /proc/cpuinfo ("unknown CPU" elsewhere).
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown CPU";
}

}  // namespace perfsim::bench
