// A hardware profile for the machine perfsim runs on, estimated from what the OS reports
// (/proc/cpuinfo, /proc/meminfo): the prediction target paired with CPU-backend measurements.
#pragma once
#include <string>
#include <string_view>

#include "core/cost/hardware.hpp"

namespace perfsim {

// What the OS tells about the host CPU.
struct HostCpuInfo {
  std::string model_name;   // "AMD EPYC 7B13"; "unknown CPU" when not reported
  double ghz = 0;           // clock from "cpu MHz" (highest core), or a default
  int cores = 1;            // logical CPUs (std::thread::hardware_concurrency)
  std::string isa;          // "AVX-512", "AVX2+FMA" or "scalar/SSE"
  int flops_per_cycle = 8;  // fp32 FLOPs per core per cycle for that ISA
  double memory_bytes = 0;  // MemTotal
};

// Parses the text of /proc/cpuinfo and /proc/meminfo (either may be empty) for `cores` CPUs.
[[nodiscard]] HostCpuInfo parse_host_cpu(std::string_view cpuinfo, std::string_view meminfo,
                                         unsigned cores);
// Reads /proc and the thread count of this machine; falls back to defaults when unreadable.
[[nodiscard]] HostCpuInfo read_host_cpu();
// The profile for given CPU facts: name "host-cpu", kind "cpu", uncalibrated estimates.
[[nodiscard]] Hardware host_cpu_profile(const HostCpuInfo& cpu);
// host_cpu_profile(read_host_cpu()).
[[nodiscard]] Hardware detect_host_cpu();

}  // namespace perfsim
