// An H100 node for the parallel tests: datasheet peaks (bf16, fp32), memory and bandwidth,
// NVLink within 8 GPUs and InfiniBand across nodes, 132 SMs of which collectives take 16.
// Uncalibrated: every efficiency 1, so the figures are checkable by hand.
#pragma once
#include "core/cost/hardware.hpp"

namespace perfsim::test_models {

inline Hardware h100_node() {
  Hardware hw;
  hw.name = "test-h100";
  hw.peak_flops[static_cast<int>(DType::bf16)] = 989e12;
  hw.peak_flops[static_cast<int>(DType::fp32)] = 67e12;
  hw.memory_bytes = 80e9;
  hw.memory_bandwidth = 3.35e12;
  hw.nvlink = {450e9, 3e-6};
  hw.infiniband = {50e9, 5e-6};
  hw.gpus_per_node = 8;
  hw.sm_count = 132;
  hw.collective_sms = 16;
  return hw;
}

}  // namespace perfsim::test_models
