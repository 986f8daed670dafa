// Kernel workspaces: the device bytes an op's kernels need besides its tensors, as the CUDA
// backend allocates them (one block per op, carved into the pieces listed below), and the
// workspaces a GPU backend holds for the whole step (library workspaces, fp8 scales, fused
// optimizer descriptors). The memory model adds both to the walk (core/cost/memory_model.hpp),
// so the predicted peak is the one the backend measures. A CPU profile (kind "cpu") gets the
// CPU backend's scratch: fp32 packing panels of 16-bit GEMMs and converted operands.
#pragma once
#include <cstdint>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/graph/graph.hpp"

namespace perfsim {

// Every piece of an op's workspace starts on this boundary (cuBLASLt and 16-byte vector
// loads need aligned pointers): a piece of b bytes takes round_up(b, 256).
inline constexpr int64_t workspace_alignment = 256;
// cuBLASLt's workspace, held by the GEMM engine for the backend's life (NVIDIA's advice for
// Hopper: 32 MiB, cuBLAS docs "cublasSetWorkspace").
inline constexpr int64_t gemm_library_workspace = int64_t{32} << 20;
// The cuBLAS handle's workspace for materialized attention's batched products (32 MiB).
inline constexpr int64_t attention_library_workspace = int64_t{32} << 20;
// One device dequantization scale per fp8 tensor, each on its own 256-byte line.
inline constexpr int64_t fp8_scale_slot_bytes = 256;
// One fused-AdamW descriptor per parameter group: 5 pointers, 2 int64, 5 storage enums,
// padded to 8 bytes (backends/cuda/kernels/adamw.cuh AdamWDeviceGroup; a GPU test checks).
inline constexpr int64_t adamw_descriptor_bytes = 80;
// Elements up to which the fp8 activation quantizer runs in one block without partials.
inline constexpr int64_t fp8_single_block_elements = int64_t{1} << 16;
// Flash attention forward with seq_q up to this runs the split-KV decode kernel.
inline constexpr int64_t decode_kernel_max_seq_q = 8;

// Transient workspace of one op (bytes, a multiple of workspace_alignment): allocated before
// the op runs and freed after it (held to the end of the step for a side-stream op). The
// pieces, per op kind (see docs/COST_MODEL.md "Memory"):
//   - operand staging: each float operand stored in another type than the kernel computes
//     in (an fp32 master copy fed to a bf16 kernel...) gets a converted copy;
//   - gemm: A/B staged to the op's precision; C through an fp32 copy when cuBLASLt cannot
//     write C's type (e.g. fp32 inputs, bf16 C);
//   - fp8 gemm: 4 scale/amax lines (1 KiB); each operand not already e4m3 in the TN form is
//     quantized/transposed into an e4m3 copy (n bytes), plus the activation quantizer's
//     partials (4 bytes per block) above 65536 elements;
//   - rmsnorm_bwd / layernorm_bwd: dgamma and dbeta partials 2 · min(rows, 512) · cols fp32;
//   - flash_attention_bwd: dQ accumulators b·sq·H·d fp32 (rounded to 16 B) + D b·H·sq fp32;
//   - flash_attention with seq_q ≤ 8 (split-KV decode; not a ring-attention block after the
//     first) and every paged_flash_attention: splits · b·H·sq · (d + 2) fp32,
//     splits = clamp(min(⌈4·SMs / (b·Hkv)⌉, ⌈seq_kv / 64⌉), 1, 256) — SMs from the Hardware;
//   - embedding_bwd with a 16-bit table: an fp32 copy of dtable (and dpositions);
//   - attn_context_bwd / attn_scores_bwd, 16-bit with GQA: the dK/dV group sum in fp32;
//   - copy between the host and the device changing the type: the host-typed staging copy.
// 0 for host ops and collectives.
[[nodiscard]] double workspace_bytes(const Op& op, const Graph& g, const Hardware& hw);
// workspace_bytes of every op, in graph order (one pass over the graph's fp8 layouts).
[[nodiscard]] std::vector<double> workspace_per_op(const Graph& g, const Hardware& hw);

// Workspaces held for the whole step on a GPU profile (bytes; all 0 on a CPU profile).
struct PersistentWorkspace {
  double gemm_library = 0;       // cuBLASLt workspace (every GPU graph)
  double attention_library = 0;  // cuBLAS workspace (graphs with materialized attention products)
  double fp8_scales = 0;         // fp8 tensors × fp8_scale_slot_bytes
  double adamw_descriptors = 0;  // fused AdamW ops: parameter groups × adamw_descriptor_bytes
  [[nodiscard]] double total() const { return gemm_library + attention_library + fp8_scales + adamw_descriptors; }
};
// scaled: tensors and groups counted × Tensor::count (the whole model), as predict_memory.
[[nodiscard]] PersistentWorkspace persistent_workspace(const Graph& g, const Hardware& hw, bool scaled = false);

// Per tensor id: a persistent e4m3 tensor that fp8 GEMMs read only as operand B untransposed,
// all with one [batch][k, n] layout, which a GPU backend stores transposed ([batch][n, k],
// the fp8 GEMM's TN form) so those GEMMs read it in place.
[[nodiscard]] std::vector<char> fp8_b_stored_transposed(const Graph& g);

}  // namespace perfsim
