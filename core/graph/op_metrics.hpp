// FLOPs and bytes each op performs and moves, derived from its shapes and dtypes.
// These are per single op (not multiplied by Op::count).
#pragma once
#include <string>

#include "core/graph/graph.hpp"

namespace perfsim {

// Floating-point operations (a fused multiply-add counts 2).
[[nodiscard]] double op_flops(const Op& op, const Graph& g);
// Bytes read + written from memory by an ideal kernel (each operand touched once per pass).
[[nodiscard]] double op_bytes(const Op& op, const Graph& g);
// Sum of op_flops × count over the graph (the whole step, all layers).
[[nodiscard]] double graph_flops(const Graph& g);
// The FLOPs of an op's matrix products, what model FLOP utilisation counts (Narayanan et al.
// 2021, §5.1, eq. 3; Chowdhery et al. 2022, PaLM, App. B): GEMMs, attention's Q·K^T and P·V and
// their gradients, convolutions and theirs; 0 for element-wise work (softmax, norms, activations, losses, AdamW).
// `model`: without what a kernel recomputes inside itself (flash attention's backward rebuilds
// S, so it counts 2× its forward instead of the 2.5× it performs).
[[nodiscard]] double op_matmul_flops(const Op& op, const Graph& g, bool model);

// Which way a copy op moves its bytes, read from the residences of its operands.
enum class CopyDirection { device_to_device, upload, download, host_to_host };
[[nodiscard]] CopyDirection copy_direction(const Op& op, const Graph& g);
// The host tensor of an upload (its input) or a download (its output); nullptr otherwise.
[[nodiscard]] const Tensor* host_side(const Op& op, const Graph& g);
// "upload (pinned)", "download (pageable)" for copies across the host link, "" otherwise.
[[nodiscard]] std::string transfer_label(const Op& op, const Graph& g);

// Whether the op computes in fp8 or reads or writes an fp8 tensor.
[[nodiscard]] bool touches_fp8(const Op& op, const Graph& g);

// Kernels the host launches for one op: its eager dispatch scales with them, and each pays the
// device's launch cost (Hardware::launch_eager or launch_graph). One, except: materialized
// attention products run as strided-batched GEMMs, one call per (sequence, query head of a GQA
// group) or, when fewer, per query head, and the backward kinds make two products; an fp8 GEMM
// first quantizes its activation; an unfused AdamW sweeps once per pass; norm backwards sum
// their weight gradients in a second kernel; the flash backward has three kernels; the
// embedding backward zeroes, scatters and (16-bit tables) converts; the MoE router picks the
// top k then scans the slots, and the dispatch and the combine's backward zero their expert
// buffers before the scatter; a varlen flash attention whose step mixes decodes with longer
// query runs (0 < decode_seqs < batch) runs a decode kernel over the decodes and a prefill
// kernel over the rest.
[[nodiscard]] int kernel_launches(const Op& op);

}  // namespace perfsim
