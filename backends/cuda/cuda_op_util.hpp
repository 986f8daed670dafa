// Small helpers shared by the op dispatch files (cuda_op_exec.cpp, cuda_op_kernels.cpp).
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "backends/cuda/cuda_convert.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::cuda::op_detail {

// Throws NotExecutable naming the op.
[[noreturn]] void fail(const Op& op, const std::string& what);
// How the backend stores tensor `id`.
[[nodiscard]] Elem elem(const Graph& g, int id);
[[nodiscard]] bool is_float(Elem e);
// Operands whose storage is fixed by the op's definition rather than by its precision
// (token ids, the loss, the log-sum-exp): the same table as the CPU runner's.
[[nodiscard]] std::optional<Elem> fixed_elem(OpKind k, bool is_output, std::size_t i);
// Whether tensor `id` is an fp8 KV cache (the fp8_kv pass): the kernels of the ops on it read and
// write its e4m3 bytes in place, so the op paths never stage a converted copy of it (nor does
// core/cost/workspace.cpp plan one).
[[nodiscard]] bool fp8_kv_cache(const Graph& g, int id);

}  // namespace perfsim::cuda::op_detail
