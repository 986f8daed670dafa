// GEMMs on quantized weights in the CUDA backend (int8_weights, int4_weights, w8a8): which
// ones it runs, how it stores their weights, and their device view. The op path itself is
// OpExecutor::run_quantized_gemm (cuda_quantized_gemm.cpp):
//   weight-only, up to quantized_fused_rows rows: the fused dequantizing GEMV into fp32
//     partials, then their sum into C (kernels/quantized_gemm.cuh);
//   weight-only, more rows: the weight dequantized into the op's float type, then cuBLASLt;
//   W8A8: the activations quantized per row to int8, cuBLASLt's int8 GEMM into int32, then
//     the row and column scales applied into C. Its weights are stored with their values
//     transposed, [N, K] (the only form the int8 kernels take), once at fill time.
// Workspace: core/cost/workspace.cpp plans the same bytes.
#pragma once
#include <string>
#include <vector>

#include "backends/cuda/kernels/quantized_gemm.cuh"
#include "core/graph/graph.hpp"

namespace perfsim::cuda {

// "" when the backend runs GEMM `op` on its quantized weight (or op reads none); otherwise why not.
[[nodiscard]] std::string quantized_gemm_unsupported_reason(const Op& op, const Graph& g);
// By tensor id: a quantized weight W8A8's int8 GEMMs read, stored [N, K].
[[nodiscard]] std::vector<char> int8_gemm_weights(const Graph& g);
// Tensor t's view in its device buffer (t quantized: t.quant_group > 0).
[[nodiscard]] QuantWeightView quant_view(const Tensor& t, const void* data);
// Values [K, N] <-> [N, K] of a quantized weight in host memory (the scales stay).
void transpose_quantized_values(const Tensor& t, const unsigned char* from, unsigned char* to, bool to_nk);

}  // namespace perfsim::cuda
