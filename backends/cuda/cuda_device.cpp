#include "backends/cuda/cuda_device.hpp"

#include <cuda_runtime.h>

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
