// fp8 GEMM ops (OpExecutor::run_fp8_gemm) and the storage of fp8 weights (fp8_storage), see
// cuda_op_exec.hpp. cuBLASLt's fp8 kernels take row-major A [m, k] and B [n, k] (the TN
// form). Per call only what is not already in that form is staged:
//   - a float activation: quantize_activation_e4m3 (cuda_fp8_activation.hpp), no transpose;
//   - an e4m3 weight stored transposed at fill time (fp8_storage): read in place;
//   - anything else (trans_a activations, float or untransposed e4m3 B operands, as in fp8
//     training): the general quantize/transpose of cuda_convert.hpp into scratch.
// Staged copies and workspaces are transient activation memory of the op.
#include <fmt/format.h>

#include "backends/ops/op_shapes.hpp"
#include "backends/cuda/cuda_convert.hpp"
#include "backends/cuda/cuda_fp8_activation.hpp"
#include "backends/cuda/cuda_op_exec.hpp"
#include "core/cost/workspace.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

std::vector<Fp8Storage> fp8_storage(const Graph& g) {
  // Which tensors are stored transposed is decided once, in core, for the memory model and
  // this backend alike; here only the layout each one takes.
  const std::vector<char> transposed = fp8_b_stored_transposed(g);
  std::vector<Fp8Storage> out(g.tensors.size());
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::gemm || op.inputs.size() < 2) continue;
    const auto id = static_cast<std::size_t>(op.inputs[1]);
    if (!transposed[id] || out[id].transposed) continue;
    const ops::GemmShape s = ops::gemm_shape(op, g);
    out[id] = Fp8Storage{true, s.broadcast_b ? 1 : s.batch, s.k, s.n};
  }
  return out;
}

void OpExecutor::run_fp8_gemm(const Op& op, const std::vector<void*>& buf, const std::vector<float*>& scales) {
  const Graph& g = m_graph;
  const ops::GemmShape s = ops::gemm_shape(op, g);
  const int a = op.inputs[0], b = op.inputs[1], c = op.outputs[0];
  if (s.accumulate) copy_if_distinct(buf, op.inputs[2], c);
  // scale_a, scale_b, amax_a, amax_b, each on its own 256-byte line: cuBLASLt refuses
  // (CUBLAS_STATUS_NOT_SUPPORTED) scale pointers that are not suitably aligned.
  constexpr int line = 64;  // floats
  auto* slots = static_cast<float*>(scratch(4 * line * sizeof(float)));
  auto data = [&](int id) { return buf[static_cast<std::size_t>(id)]; };
  auto scale_of = [&](int id) { return scales[static_cast<std::size_t>(id)]; };

  // id stored [batch][rows, cols] into e4m3 [batch][rows, cols] (transpose: [batch][cols, rows]).
  auto stage = [&](int id, int64_t batch, int64_t rows, int64_t cols, bool transpose, float* scale,
                   float* amax) -> GemmOperand {
    void* p = data(id);
    const Elem have = elem_of(g.tensor(id).dtype);
    if (have == Elem::e4m3 && !transpose) return {p, Elem::e4m3, scale_of(id)};
    const int64_t n = batch * rows * cols;
    auto* q = static_cast<uint8_t*>(scratch(static_cast<std::size_t>(n)));
    if (have == Elem::e4m3) {
      transpose_e4m3(static_cast<const uint8_t*>(p), scale_of(id), q, scale, batch, rows, cols, m_stream);
    } else if (!transpose) {
      const std::size_t ws_bytes = fp8_activation_workspace_bytes(n);
      void* ws = ws_bytes > 0 ? scratch(ws_bytes) : nullptr;
      quantize_activation_e4m3(p, have, q, scale, ws, n, m_stream);
    } else {
      quantize_e4m3(p, have, q, scale, amax, batch, rows, cols, true, m_stream);
    }
    return {q, Elem::e4m3, scale};
  };
  const int64_t batch_a = s.broadcast_a ? 1 : s.batch, batch_b = s.broadcast_b ? 1 : s.batch;
  // A into [batch_a][m, k] (cuBLASLt's B, not transposed); stored [k, m] when trans_a.
  const GemmOperand ga =
      stage(a, batch_a, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.trans_a, slots, slots + 2 * line);
  // B into [batch_b][n, k] (cuBLASLt's A, transposed): in place when stored so.
  const bool b_ready = s.trans_b || m_fp8_storage[static_cast<std::size_t>(b)].transposed;
  const GemmOperand gb = b_ready ? stage(b, batch_b, s.n, s.k, false, slots + line, slots + 3 * line)
                                 : stage(b, batch_b, s.k, s.n, true, slots + line, slots + 3 * line);
  ops::GemmShape tn = s;
  tn.trans_a = false, tn.trans_b = true;
  m_gemm.gemm(ga, gb, data(c), elem_of(g.tensor(c).dtype), tn, false, m_stream);
}

}  // namespace perfsim::cuda
