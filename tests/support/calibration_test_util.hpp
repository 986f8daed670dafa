// Shared by the calibration tests: a bare GPU with unit efficiencies, a hand-checkable GEMM
// table, a temporary file, and the first op of a kind in a graph.
#pragma once
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/cost/calibration.hpp"
#include "core/cost/hardware.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::test {

inline Hardware bare_gpu() {
  Hardware hw;
  hw.name = "test-gpu";
  hw.peak_flops[static_cast<int>(DType::fp32)] = 50e12;
  hw.peak_flops[static_cast<int>(DType::bf16)] = 1000e12;
  hw.memory_bytes = 80e9;
  hw.memory_bandwidth = 2e12;
  hw.launch_eager = 5e-6;
  hw.launch_graph = 1e-6;
  for (OpClass c : all_op_classes) {
    hw.compute_efficiency[c] = 1.0;
    hw.memory_efficiency[c] = 1.0;
  }
  return hw;
}

// A 2x2x2 grid whose efficiencies are 0.1 · 2^(i+j+l): the corners span 0.1 .. 0.8.
inline GemmTable corner_table() {
  GemmTable t;
  t.m = {1, 4};
  t.n = {100, 400};
  t.k = {100, 400};
  t.efficiency.resize(8);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t l = 0; l < 2; ++l) t.cell(i, j, l) = 0.1 * std::pow(2.0, double(i + j + l));
  return t;
}

inline std::string temp_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

// The first op of `kind` in g (nullptr when there is none).
inline const Op* first_op(const Graph& g, OpKind kind) {
  for (const Op& op : g.ops)
    if (op.kind == kind) return &op;
  return nullptr;
}

}  // namespace perfsim::test
