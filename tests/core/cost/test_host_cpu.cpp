// Host CPU profile: parsing /proc text, peak FLOP/s per ISA, fallbacks, the detected profile.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "core/cost/host_cpu.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

constexpr const char* avx512_cpuinfo =
    "processor\t: 0\n"
    "model name\t: AMD EPYC 9654 96-Core Processor\n"
    "cpu MHz\t\t: 2400.000\n"
    "flags\t\t: fpu sse2 avx fma avx2 avx512f avx512bw\n"
    "\n"
    "processor\t: 1\n"
    "model name\t: AMD EPYC 9654 96-Core Processor\n"
    "cpu MHz\t\t: 3000.000\n"
    "flags\t\t: fpu sse2 avx fma avx2 avx512f avx512bw\n";

}  // namespace

TEST_CASE("host cpu: AVX-512 peak = cores x GHz x 64") {
  const HostCpuInfo cpu = parse_host_cpu(avx512_cpuinfo, "MemTotal:       16384 kB\n", 4);
  CHECK(cpu.model_name == "AMD EPYC 9654 96-Core Processor");
  CHECK(cpu.ghz == approx(3.0));  // the fastest core
  CHECK(cpu.isa == "AVX-512");
  CHECK(cpu.memory_bytes == 16384.0 * 1024);
  const Hardware hw = host_cpu_profile(cpu);
  CHECK(hw.name == "host-cpu");
  CHECK(hw.kind == "cpu");
  CHECK(hw.peak(DType::fp32) == approx(4 * 3.0e9 * 64));  // 768 GFLOP/s
  CHECK(hw.peak(DType::bf16) == hw.peak(DType::fp32));
  CHECK(hw.peak(DType::tf32) == hw.peak(DType::fp32));
  CHECK(hw.peak(DType::fp8) == 0);
  CHECK(hw.peak(DType::int8) == 0);
  CHECK(hw.memory_bandwidth == approx(4 * 8e9));
  CHECK(hw.sm_count == 4);
  CHECK(hw.compute_eff(OpClass::gemm) == 0.7);
  CHECK(hw.memory_eff(OpClass::norm) == 0.5);
  CHECK(hw.launch_eager == hw.launch_graph);
  CHECK_FALSE(hw.calibrated);
  CHECK(hw.source == "estimated from /proc/cpuinfo (uncalibrated)");
}

TEST_CASE("host cpu: AVX2+FMA, no FMA, and nothing readable") {
  const HostCpuInfo avx2 = parse_host_cpu("cpu MHz : 2000\nflags : sse avx2 fma\n", "", 2);
  CHECK(avx2.isa == "AVX2+FMA");
  CHECK(host_cpu_profile(avx2).peak(DType::fp32) == approx(2 * 2e9 * 32));
  // avx2 without the fma flag, and a flag that merely contains "fma" as a substring.
  const HostCpuInfo no_fma = parse_host_cpu("cpu MHz : 2000\nflags : avx2 fma4x\n", "", 2);
  CHECK(no_fma.flops_per_cycle == 8);
  const HostCpuInfo bare = parse_host_cpu("", "", 0);
  CHECK(bare.model_name == "unknown CPU");
  CHECK(bare.cores == 1);
  CHECK(bare.ghz == 2.0);
  CHECK(host_cpu_profile(bare).peak(DType::fp32) == approx(2e9 * 8));
  // Bandwidth is capped at one 8-channel DDR4-3200 socket.
  HostCpuInfo many = bare;
  many.cores = 256;
  CHECK(host_cpu_profile(many).memory_bandwidth == approx(204.8e9));
}

TEST_CASE("host cpu: the detected profile is usable") {
  const Hardware hw = detect_host_cpu();
  CHECK(hw.peak(DType::fp32) > 0);
  CHECK(hw.memory_bandwidth > 0);
  CHECK(hw.memory_bytes > 0);
  CHECK(hw.sm_count >= 1);
}
