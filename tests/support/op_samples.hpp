// One-op graphs for every op kind, at a precision and a few shapes each: the inputs of the op
// are persistent tensors filled from the run's seed (backends/common/tensor_init.hpp), the int32
// metadata that must follow rules (positions, query starts, KV lengths, slots, rows) written
// exactly. tests/backends/test_backend_ops.cpp runs them on the CPU backend, tests/gpu's
// test_backend_ops_gpu.cpp on the GPU against the CPU's results. A kind without samples here
// fails those tests: a new kind lands with its CPU reference and a check.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/graph/graph.hpp"

namespace perfsim::test {

struct OpSample {
  std::string label;                           // kind, variant, precision and shape
  Graph graph;                                 // one op
  std::map<int, std::vector<int32_t>> writes;  // int32 inputs to overwrite before the run
  [[nodiscard]] const Op& op() const { return graph.ops.front(); }
};

// The precisions the samples are built at: every float kernel storage.
inline constexpr DType sample_dtypes[] = {DType::fp32, DType::bf16, DType::fp16};

// Kinds that no one-op sample covers: collectives need ranks (tests/mpi, tests/gpu/test_nccl)
// and host ops have no kernel.
[[nodiscard]] bool is_sampled(OpKind k);

// The samples of kind k computing in `dtype` (empty for a kind without samples).
[[nodiscard]] std::vector<OpSample> op_samples(OpKind k, DType dtype);

// Every tensor the op writes, for reading back.
[[nodiscard]] std::vector<int> sample_outputs(const OpSample& s);

}  // namespace perfsim::test
