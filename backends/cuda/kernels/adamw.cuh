// AdamW on the GPU, mirroring cpu::adamw (backends/ops/kernel_shapes.hpp: AdamWGroup, AdamWParams,
// same stages and rounding). Two forms:
//  - unfused: for each tensor, min(passes, 4) separate kernels (decay; m; v; update split as
//    the CPU splits them), as framework "foreach" optimizers do;
//  - fused: ONE launch over every group. The launch reads an array of AdamWDeviceGroup in
//    device memory that the caller fills once (adamw_descriptors() then a copy), so the
//    launch itself does no host work and can be captured into a CUDA graph.
// Each thread moves 4 consecutive elements per tensor (a vector load when aligned).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cuda {

// Elements per work item of an AdamW kernel.
inline constexpr int64_t adamw_chunk = 4096;

// One group as the device sees it; first_chunk is the group's first work item in the fused
// launch (a prefix sum over the groups before it).
struct AdamWDeviceGroup {
  void* param = nullptr;
  const void* grad = nullptr;
  void* m = nullptr;
  void* v = nullptr;
  void* weight = nullptr;  // optional low-precision copy
  int64_t n = 0;
  int64_t first_chunk = 0;
  host::Storage param_type = host::Storage::f32, grad_type = host::Storage::f32,
               m_type = host::Storage::f32, v_type = host::Storage::f32,
               weight_type = host::Storage::bf16;
};

// Descriptors for the fused launch, in group order, with first_chunk filled.
[[nodiscard]] std::vector<AdamWDeviceGroup> adamw_descriptors(const std::vector<ops::AdamWGroup>& groups);
// Work items of the fused launch over `groups` (the last descriptor's end).
[[nodiscard]] int64_t adamw_total_chunks(const std::vector<AdamWDeviceGroup>& groups);
// Bytes of device memory the fused launch's descriptor array takes.
[[nodiscard]] inline int64_t adamw_workspace_bytes(int64_t num_groups) {
  return num_groups * static_cast<int64_t>(sizeof(AdamWDeviceGroup));
}

// One launch over all groups; `groups` [num_groups] lives in device memory.
void adamw_fused(const AdamWDeviceGroup* groups, int64_t num_groups, int64_t total_chunks,
                 const ops::AdamWParams& p, cudaStream_t stream);
// passes ≥ 2: min(passes, 4) kernels per tensor. passes ≤ 1 also works here (one kernel per
// tensor doing every stage): the fused form above is the single launch.
void adamw_unfused(const std::vector<ops::AdamWGroup>& groups, const ops::AdamWParams& p,
                   int passes, cudaStream_t stream);

}  // namespace perfsim::cuda
