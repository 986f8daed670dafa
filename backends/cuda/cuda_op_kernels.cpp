// The generic ops on the GPU: OpExecutor::run_generic stages operands stored in another float
// type than the op computes in (never an fp8 KV cache, which the kernels read and write as
// stored), then calls the kind's entry of the kernel table
// (cuda_kernel_table.hpp) with one storage type T for all float operands; on a rank whose graph
// splits the vocabulary, the embedding and loss ops over it go to run_vocab_parallel
// (cuda_vocab_parallel.hpp) instead.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "backends/ops/op_shapes.hpp"
#include "backends/ops/vocab_shard.hpp"
#include "backends/cuda/cuda_convert.hpp"
#include "backends/cuda/cuda_kernel_table.hpp"
#include "backends/cuda/cuda_op_exec.hpp"
#include "backends/cuda/cuda_op_util.hpp"
#include "backends/cuda/cuda_vocab_parallel.hpp"
#include "backends/cuda/kernels/memory_ops.cuh"
#include "core/errors.hpp"

namespace perfsim::cuda {

using op_detail::elem;
using op_detail::fail;
using op_detail::fixed_elem;
using op_detail::fp8_kv_cache;
using op_detail::is_float;

namespace {

template <class T>
void run_kernel(const Op& op, const Graph& g, const std::vector<void*>& in, const std::vector<void*>& out,
                const std::function<void*(std::size_t)>& scratch, const BlasHandle* blas, cudaStream_t stream,
                int rank) {
  const CudaKernel<T> kernel = typed_kernels<T>().find(op.kind);
  // Unreachable for a checked op: op_unsupported_reason turns away every kind without a kernel.
  if (kernel == nullptr) throw NotExecutable(fmt::format("cuda backend: no kernel for {}", name_of(op.kind)));
  kernel(CudaCall<T>{op, g, in, out, scratch, blas, stream, rank});
}

}  // namespace

void OpExecutor::run_device_copy(const Op& op, const std::vector<void*>& buf) {
  const Graph& g = m_graph;
  const ops::CopyIds id = ops::copy_ids(op);
  copy_tensor(buf[static_cast<std::size_t>(id.x)], storage_of(elem(g, id.x)), buf[static_cast<std::size_t>(id.y)],
              storage_of(elem(g, id.y)), ops::elementwise_count(op, g), m_stream);
}

void OpExecutor::run_generic(const Op& op, const std::vector<void*>& buf) {
  const Graph& g = m_graph;
  // Outputs that start from an input's values (in place when the graph names one tensor).
  const std::vector<ops::InPlace> in_place = ops::in_place_operands(op);
  for (const ops::InPlace& p : in_place) copy_if_distinct(buf, op.inputs.at(p.input), op.outputs.at(p.output));

  std::optional<Elem> kernel;
  for (std::size_t i = 0; i < op.inputs.size() && !kernel; ++i)
    if (!fixed_elem(op.kind, false, i)) kernel = elem(g, op.inputs[i]);
  if (!kernel || !is_float(*kernel))
    fail(op, fmt::format("needs floating-point operands, got {}", kernel ? name_of(*kernel) : "none"));

  std::map<int, void*> staged;  // tensor id -> converted copy
  std::vector<std::tuple<int, void*, Elem>> write_back;  // id, staged copy, its type
  // keep: an output the kernel updates in place, whose staged copy starts from its values.
  auto operand = [&](int id, Elem need, bool is_output, bool keep) -> void* {
    void* real = buf[static_cast<std::size_t>(id)];
    const Elem have = elem(g, id);
    // An fp8 KV cache goes as its bytes: the kernels take its storage from the op's shapes
    // (KvStorage) and read or write e4m3 in place (workspace.cpp plans no copy of it).
    if (have == need || fp8_kv_cache(g, id)) return real;
    if (!is_float(have) || !is_float(need))
      fail(op, fmt::format("tensor '{}' is {} where the op needs {}", g.tensor(id).name, name_of(have), name_of(need)));
    const int64_t n = g.tensor(id).elements();
    auto it = staged.find(id);
    if (it == staged.end()) {
      void* p = scratch(static_cast<std::size_t>(n) * static_cast<std::size_t>(bytes_of(need)));
      if (!is_output || keep) convert(real, have, p, need, n, m_stream);
      it = staged.emplace(id, p).first;
    }
    if (is_output) write_back.emplace_back(id, it->second, need);
    return it->second;
  };
  std::vector<void*>& in = m_in;
  std::vector<void*>& out = m_out;
  in.clear(), out.clear();
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    in.push_back(operand(op.inputs[i], fixed_elem(op.kind, false, i).value_or(*kernel), false, false));
  for (std::size_t i = 0; i < op.outputs.size(); ++i) {
    const bool keep = std::any_of(in_place.begin(), in_place.end(), [&](const ops::InPlace& p) { return p.output == i; });
    out.push_back(operand(op.outputs[i], fixed_elem(op.kind, true, i).value_or(*kernel), true, keep));
  }

  const std::function<void*(std::size_t)> scratch_fn = [this](std::size_t bytes) { return scratch(bytes); };
  const int rank = m_ranks != nullptr ? m_ranks->rank() : 0;
  if (m_ranks != nullptr && ops::on_vocab_shard(op, g)) {
    // A vocabulary split among ranks: the same staged operands, the rank's part of the op.
    const std::function<void*(std::size_t)> extra_fn = [this](std::size_t bytes) { return scratch_or_extra(bytes); };
    switch (*kernel) {
      case Elem::f32: run_vocab_parallel<float>(op, g, in, out, *m_ranks, scratch_fn, extra_fn, m_stream); break;
      case Elem::bf16:
        run_vocab_parallel<__nv_bfloat16>(op, g, in, out, *m_ranks, scratch_fn, extra_fn, m_stream);
        break;
      case Elem::f16: run_vocab_parallel<__half>(op, g, in, out, *m_ranks, scratch_fn, extra_fn, m_stream); break;
      default: break;
    }
  } else {
    switch (*kernel) {
      case Elem::f32: run_kernel<float>(op, g, in, out, scratch_fn, m_blas.get(), m_stream, rank); break;
      case Elem::bf16: run_kernel<__nv_bfloat16>(op, g, in, out, scratch_fn, m_blas.get(), m_stream, rank); break;
      case Elem::f16: run_kernel<__half>(op, g, in, out, scratch_fn, m_blas.get(), m_stream, rank); break;
      default: break;
    }
  }
  for (const auto& [id, data, type] : write_back)
    convert(data, type, buf[static_cast<std::size_t>(id)], elem(g, id), g.tensor(id).elements(), m_stream);
}

}  // namespace perfsim::cuda
