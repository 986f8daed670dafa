// The synthetic graphs `perfsim calibrate` times besides the model graphs: independent GEMMs
// (one per grid cell, each with its own operands), a chain of tiny ops for the launch floor,
// and host-to-device copies of growing size.
#pragma once
#include <cstdint>
#include <vector>

#include "core/graph/graph.hpp"

namespace perfsim {

// One cell of the GEMM grid: C[m,n] = A[m,k]·B[k,n] computing in `dtype`.
struct GemmCell {
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::bf16;
  std::size_t index = 0;  // position in the table's cell vector (GemmTable::cell order)
  bool trans_b = false;   // B stored [n, k] (a tied lm_head's layout), else [k, n]
};

// Bytes of the cell's three operands as the graph stores them (fp8: A and C in bf16, B in fp8,
// as the fp8 precision pass leaves an inference linear layer).
[[nodiscard]] double gemm_cell_bytes(const GemmCell& c);

// Op i computes cells[i]; A and B are persistent (weights), C an activation freed after it.
[[nodiscard]] Graph gemm_cells_graph(const std::vector<GemmCell>& cells);

// `ops` residual adds over `elements` fp32 values, each reading the previous one's output.
[[nodiscard]] Graph launch_chain_graph(int ops, int64_t elements);

// One upload per entry of `bytes` (fp32 rows rounded down to whole elements) from host memory
// of residence `from` into a device input.
[[nodiscard]] Graph upload_graph(const std::vector<double>& bytes, Residence from);

// Packs items of the given byte sizes into groups of at most `max_bytes` each (an item larger
// than that goes alone), interleaving small and large items so consecutive ops in a group
// touch different amounts of memory and small operands are not left in cache by their
// neighbours. Returns indices into `bytes`.
[[nodiscard]] std::vector<std::vector<std::size_t>> pack_interleaved(const std::vector<double>& bytes,
                                                                      double max_bytes);

}  // namespace perfsim
