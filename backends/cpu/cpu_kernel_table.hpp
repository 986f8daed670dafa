// The CPU backend's kernels by op kind (ops::KernelTable): what each kind's entry calls, with
// its operands named by a view of backends/ops/op_io.hpp and its shapes from
// backends/ops/op_shapes.hpp. execute_op (cpu_op_exec.hpp) stages the operands and looks the
// kernel up.
#pragma once
#include <span>
#include <vector>

#include "backends/cpu/scratch.hpp"
#include "backends/ops/kernel_table.hpp"
#include "backends/ops/operands.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::cpu {

// A call of a kernel whose float operands share one storage T (float, bf16, half): in and out
// hold the op's operands staged in T (fixed int32/fp32 operands as they are).
template <class T>
struct TypedCall {
  const Op& op;
  const Graph& g;
  std::span<void* const> in, out;
  int rank = 0;  // the executing global rank: a context-parallel op's rows follow from it
  template <class V> [[nodiscard]] V view() const { return ops::view<V>(op, in, out); }
};
template <class T> using TypedKernel = void (*)(const TypedCall<T>&);

// A call of a kernel whose operands keep their own storages (GEMM, AdamW, copy): every tensor's
// buffer by id.
struct MixedCall {
  const Op& op;
  const Graph& g;
  const std::vector<void*>& buffers;
  Scratch& scratch;
};
using MixedKernel = void (*)(const MixedCall&);

template <class T> [[nodiscard]] const ops::KernelTable<TypedKernel<T>>& typed_kernels();
[[nodiscard]] const ops::KernelTable<MixedKernel>& mixed_kernels();

// Whether the CPU backend has a kernel for kind k.
[[nodiscard]] bool has_kernel(OpKind k);
// Whether kind k's kernel reads or writes a KV cache stored in fp8 (the fp8_kv pass's kinds: the
// appends and the forward flash attentions). Such a cache (is_fp8_kv_cache) is handed to the
// kernel as it is, never as a converted copy: the memory model plans no staging for it.
[[nodiscard]] bool has_fp8_kv_kernel(OpKind k);
[[nodiscard]] bool is_fp8_kv_cache(const Tensor& t);

}  // namespace perfsim::cpu
