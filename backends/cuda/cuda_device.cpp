#include "backends/cuda/cuda_device.hpp"

#include <cuda_runtime.h>

#include <fstream>
#include <sstream>
#include <string>

#include "backends/cuda/cuda_check.hpp"

namespace perfsim::cuda {

bool gpu_present() { return device_count() > 0; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

namespace {

// Maps the marketing name to a catalog entry ("" when there is none); the H100 SXM
// reports "H100 80GB HBM3", the PCIe card "H100 PCIe".
std::string catalog_name_for(const std::string& name, double memory_bytes) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("H200")) return "H200";
  if (has("H100")) return has("PCIe") ? "H100-PCIe" : "H100-SXM";
  if (has("B200")) return "B200";
  if (has("A100")) return memory_bytes > 50e9 ? "A100-80GB" : "A100-40GB";
  if (has("V100")) return "V100";
  if (has("L4")) return "L4";
  return "";
}

// The NVIDIA kernel module's version ("580.65.06") from /proc, "" when it cannot be read.
std::string kernel_module_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(f, line)) return "";
  const auto at = line.find("Kernel Module");
  if (at == std::string::npos) return "";
  // "... Kernel Module for x86_64  580.65.06  <date>" or "... Kernel Module  580.65.06  <date>".
  std::istringstream words(line.substr(at + 13));
  for (std::string v; words >> v;)
    if (!v.empty() && v.front() >= '0' && v.front() <= '9') return v;
  return "";
}

}  // namespace

DeviceInfo query_device(int ordinal) {
  cudaDeviceProp prop{};
  PERFSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  DeviceInfo d;
  d.backend = "cuda";
  d.name = prop.name;
  d.compute_units = prop.multiProcessorCount;
  d.memory_bytes = static_cast<double>(prop.totalGlobalMem);
  d.l2_bytes = static_cast<double>(prop.l2CacheSize);
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, ordinal) == cudaSuccess)
    d.clock_hz = khz * 1e3;
  d.catalog_name = catalog_name_for(d.name, d.memory_bytes);
  // Versions as "major.minor" (the runtime encodes 1000·major + 10·minor).
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) d.driver = "CUDA " + version(driver);
  if (const std::string module = kernel_module_version(); !module.empty())
    d.driver = module + (d.driver.empty() ? "" : " (" + d.driver + ")");
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) d.runtime = "CUDA runtime " + version(runtime);
  return d;
}

Hardware device_profile(int ordinal) {
  int sms = 0;
  PERFSIM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal));
  Hardware hw;
  const DeviceInfo d = query_device(ordinal);
  hw.name = d.catalog_name.empty() ? d.name : d.catalog_name;
  hw.kind = "gpu";
  hw.sm_count = sms;
  hw.memory_bytes = d.memory_bytes;
  hw.l2_bytes = d.l2_bytes;
  return hw;
}

}  // namespace perfsim::cuda
