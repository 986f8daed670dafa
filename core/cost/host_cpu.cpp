// Host CPU detection: peak FLOP/s from cores × clock × SIMD width, memory from /proc/meminfo,
// bandwidth and efficiencies from documented defaults (the OS exposes no datasheet).
#include "core/cost/host_cpu.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "core/text.hpp"

namespace perfsim {

namespace {

// Clock assumed when /proc/cpuinfo reports none (e.g. some ARM kernels): a typical server base
// clock.
constexpr double default_ghz = 2.0;
// DRAM bandwidth one core can draw: a few streams of ~8 GB/s each per core is typical of
// STREAM triad results on current x86 servers; an estimate, to be replaced by calibration.
constexpr double bandwidth_per_core = 8e9;
// Cap: one socket with 8 channels of DDR4-3200 moves 8 × 25.6 GB/s = 204.8 GB/s (JEDEC JESD79-4).
constexpr double bandwidth_cap = 204.8e9;
// OpenBLAS SGEMM sustains roughly 70% of the FMA peak on large matrices; an uncalibrated guess
// applied to every class until `perfsim calibrate` fits per-class values.
constexpr double compute_efficiency = 0.7;
// Streaming loops reach about half of the nominal DRAM bandwidth without non-temporal stores
// or prefetch tuning (an uncalibrated guess, applied to every class).
constexpr double memory_efficiency = 0.5;
// A CPU "launch" is a function call plus the thread-pool dispatch of the kernel: about 1 µs.
constexpr double cpu_dispatch_seconds = 1e-6;
// Used when neither /proc/meminfo nor sysconf reports the memory size.
constexpr double default_memory_bytes = 8.0 * 1024 * 1024 * 1024;

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Splits "key\t: value" lines; calls f(key, value) for each.
template <typename F>
void for_each_field(std::string_view text, F&& f) {
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    f(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
  }
}

double to_double(std::string_view s) {
  const std::string copy(s);  // strtod needs a terminated string
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() ? 0.0 : v;
}

bool has_flag(std::string_view flags, std::string_view flag) {
  std::size_t pos = 0;
  while (pos < flags.size()) {
    const auto end = std::min(flags.find(' ', pos), flags.size());
    if (flags.substr(pos, end - pos) == flag) return true;
    pos = end + 1;
  }
  return false;
}

}  // namespace

HostCpuInfo parse_host_cpu(std::string_view cpuinfo, std::string_view meminfo, unsigned cores) {
  HostCpuInfo cpu;
  cpu.cores = cores > 0 ? static_cast<int>(cores) : 1;
  double mhz = 0;
  std::string_view flags;
  for_each_field(cpuinfo, [&](std::string_view key, std::string_view value) {
    if (key == "model name" && cpu.model_name.empty()) cpu.model_name = std::string(value);
    // The highest core clock: idle cores of a frequency-scaling host report less.
    if (key == "cpu MHz") mhz = std::max(mhz, to_double(value));
    if (key == "flags" && flags.empty()) flags = value;
  });
  if (cpu.model_name.empty()) cpu.model_name = "unknown CPU";
  cpu.ghz = mhz > 0 ? mhz / 1000.0 : default_ghz;
  // fp32 FLOPs per cycle: FMA units × lanes × 2 (vendor ISA manuals). Two 512-bit FMA units
  // hold 2 × 16 lanes; two 256-bit units 2 × 8; without FMA assume one 128-bit add and mul (8).
  if (has_flag(flags, "avx512f")) {
    cpu.isa = "AVX-512";
    cpu.flops_per_cycle = 2 * 16 * 2;
  } else if (has_flag(flags, "avx2") && has_flag(flags, "fma")) {
    cpu.isa = "AVX2+FMA";
    cpu.flops_per_cycle = 2 * 8 * 2;
  } else {
    cpu.isa = "scalar/SSE";
    cpu.flops_per_cycle = 8;
  }
  for_each_field(meminfo, [&](std::string_view key, std::string_view value) {
    if (key == "MemTotal") cpu.memory_bytes = to_double(value) * 1024.0;  // reported in kB
  });
  return cpu;
}

HostCpuInfo read_host_cpu() {
  HostCpuInfo cpu = parse_host_cpu(read_text_file("/proc/cpuinfo").value_or(""),
                                   read_text_file("/proc/meminfo").value_or(""), std::thread::hardware_concurrency());
  if (cpu.memory_bytes <= 0) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    cpu.memory_bytes = pages > 0 && page > 0
                           ? static_cast<double>(pages) * static_cast<double>(page)
                           : default_memory_bytes;
  }
  return cpu;
}

Hardware host_cpu_profile(const HostCpuInfo& cpu) {
  Hardware hw;
  hw.name = "host-cpu";
  hw.kind = "cpu";
  // Peak = cores × clock × FLOPs/cycle (vendor ISA manuals: FMA units × lanes × 2).
  const double fp32 = cpu.cores * cpu.ghz * 1e9 * cpu.flops_per_cycle;
  hw.peak_flops[static_cast<int>(DType::fp32)] = fp32;
  hw.peak_flops[static_cast<int>(DType::tf32)] = fp32;
  // The CPU backend computes bf16/fp16 ops in fp32 arithmetic, so they run at the fp32 rate.
  hw.peak_flops[static_cast<int>(DType::bf16)] = fp32;
  hw.peak_flops[static_cast<int>(DType::fp16)] = fp32;
  hw.memory_bytes = cpu.memory_bytes;
  hw.memory_bandwidth = std::min(bandwidth_per_core * cpu.cores, bandwidth_cap);
  hw.sm_count = cpu.cores;
  // One thread's copy rate is the bandwidth one core draws.
  hw.host_copy_bandwidth = bandwidth_per_core;
  hw.launch_eager = cpu_dispatch_seconds;
  hw.launch_graph = cpu_dispatch_seconds;  // nothing to replay on a CPU
  hw.host_overhead = 0;
  for (OpClass c : all_op_classes) {
    hw.compute_efficiency[c] = compute_efficiency;
    hw.memory_efficiency[c] = memory_efficiency;
  }
  hw.calibrated = false;
  hw.source = "estimated from /proc/cpuinfo (uncalibrated)";
  return hw;
}

Hardware detect_host_cpu() { return host_cpu_profile(read_host_cpu()); }

}  // namespace perfsim
