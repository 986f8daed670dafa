// GEMMs on quantized weights (cuda_quantized_gemm.hpp).
#include "backends/cuda/cuda_quantized_gemm.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "backends/common/parallel.hpp"
#include "backends/common/quantized_weights.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "backends/cuda/cuda_op_exec.hpp"
#include "backends/cuda/cuda_op_util.hpp"
#include "backends/ops/op_shapes.hpp"
#include "core/cost/kernel_paths.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

using op_detail::elem;
using op_detail::fail;

namespace {

bool quantized_weight(const Op& op, const Graph& g) {
  return op.kind == OpKind::gemm && op.inputs.size() > 1 && g.tensor(op.inputs[1]).quant_group > 0;
}

}  // namespace

std::string quantized_gemm_unsupported_reason(const Op& op, const Graph& g) {
  if (!quantized_weight(op, g)) return {};
  const Tensor& w = g.tensor(op.inputs[1]);
  if (!w.shard.empty())
    return fmt::format("cuda backend runs quantized weights on one GPU: '{}' is a shard", w.name);
  ops::GemmShape s;
  try {
    s = ops::gemm_shape(op, g);
  } catch (const NotExecutable& e) {
    return e.what();
  }
  if (s.batch != 1 || s.trans_a || s.trans_b || w.shape.size() != 2)
    return fmt::format("cuda backend: '{}' reads its quantized weight as one [K, N] matrix with A stored [M, K]",
                       op.name);
  for (int id : {op.inputs[0], op.outputs[0]})
    if (!op_detail::is_float(elem(g, id)))
      return fmt::format("cuda backend: '{}' on a quantized weight takes and writes f32, bf16 or f16, not {}", op.name,
                         name_of(g.tensor(id).dtype));
  if (op.dtype == DType::int8) return GemmEngine::int8_unsupported(s.m, s.n, s.k);
  return {};
}

std::vector<char> int8_gemm_weights(const Graph& g) {
  std::vector<char> out(g.tensors.size(), 0);
  for (const Op& op : g.ops)
    if (quantized_weight(op, g) && op.dtype == DType::int8) out[static_cast<std::size_t>(op.inputs[1])] = 1;
  return out;
}

QuantWeightView quant_view(const Tensor& t, const void* data) {
  const host::QuantLayout q = host::quant_layout(t);
  QuantWeightView v;
  v.data = data;
  v.k = q.k, v.n = q.n, v.group = q.group;
  v.int4 = q.int4, v.zeros = q.zeros;
  v.scale_offset = q.scale_offset();
  v.zero_offset = q.zero_offset();
  return v;
}

void transpose_quantized_values(const Tensor& t, const unsigned char* from, unsigned char* to, bool to_nk) {
  const host::QuantLayout q = host::quant_layout(t);
  if (q.int4) throw std::logic_error("transpose_quantized_values: int8 values only");
  const int64_t rows = to_nk ? q.n : q.k, cols = to_nk ? q.k : q.n;  // of the result
  host::parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) to[r * cols + c] = from[c * rows + r];
  });
  std::memcpy(to + q.value_bytes(), from + q.value_bytes(), q.bytes() - q.value_bytes());
}

void OpExecutor::run_quantized_gemm(const Op& op, const std::vector<void*>& buf) {
  const Graph& g = m_graph;
  const ops::GemmShape s = ops::gemm_shape(op, g);
  const int a = op.inputs[0], b = op.inputs[1], c = op.outputs[0];
  if (s.accumulate) copy_if_distinct(buf, op.inputs[2], c);
  const Tensor& wt = g.tensor(b);
  const QuantWeightView w = quant_view(wt, buf[static_cast<std::size_t>(b)]);
  void* a_ptr = buf[static_cast<std::size_t>(a)];
  void* c_ptr = buf[static_cast<std::size_t>(c)];
  const Elem a_type = elem(g, a), c_type = elem(g, c);
  if (op.dtype == DType::int8) {  // W8A8
    auto* qa = static_cast<int8_t*>(scratch(static_cast<std::size_t>(s.m * s.k)));
    auto* row_scales = static_cast<float*>(scratch(static_cast<std::size_t>(s.m) * sizeof(float)));
    auto* acc = static_cast<int32_t*>(scratch(static_cast<std::size_t>(s.m * s.n) * sizeof(int32_t)));
    quantize_rows_int8(a_ptr, a_type, s.m, s.k, qa, row_scales, m_stream);
    m_gemm.int8_gemm(qa, static_cast<const int8_t*>(w.data), acc, s.m, s.n, s.k, m_stream);
    scale_int8_product(acc, row_scales, static_cast<const char*>(w.data) + w.scale_offset, s.m, s.n, c_ptr, c_type,
                       s.accumulate, m_stream);
    return;
  }
  if (quantized_gemv_fits(w, s.m) && reinterpret_cast<std::uintptr_t>(a_ptr) % 16 == 0) {
    quantized_gemv(a_ptr, a_type, s.m, w, quantized_gemv_splits_here(s.n, s.k), c_ptr, c_type, s.accumulate, m_stream);
    return;
  }
  // More rows: the weight as floats of the op's type, then the float GEMM's path.
  Elem in = elem_of(op.dtype);
  if (!op_detail::is_float(in)) in = a_type;
  void* weight = scratch(static_cast<std::size_t>(s.k * s.n) * static_cast<std::size_t>(bytes_of(in)));
  dequantize_weight(w, weight, in, m_stream);
  run_float_gemm(op, buf, GemmOperand{weight, in, nullptr});
}

}  // namespace perfsim::cuda
