// Building the calibration sweeps' synthetic graphs (see graphs.hpp).
#include "core/calibrate/graphs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace perfsim {

namespace {

// Storage of the A and C operands: fp8 GEMMs read bf16 activations (quantized per call) and
// write bf16; tf32 is a compute mode over fp32 storage.
DType storage_of(DType compute) {
  if (compute == DType::fp8) return DType::bf16;
  if (compute == DType::tf32) return DType::fp32;
  return compute;
}

// Weights stay in fp8 for fp8 GEMMs, as the fp8 pass stores inference linear weights.
DType weight_storage_of(DType compute) { return compute == DType::fp8 ? DType::fp8 : storage_of(compute); }

Graph empty_graph(const char* name) {
  Graph g;
  g.model = name;
  g.layers_total = 1;
  g.layers_built = 1;
  return g;
}

int add(Graph& g, std::string name, std::vector<int64_t> shape, DType t, TensorRole role,
        Residence where = Residence::device) {
  Tensor x;
  x.name = std::move(name);
  x.shape = std::move(shape);
  x.dtype = t;
  x.role = role;
  x.residence = where;
  return g.add_tensor(std::move(x));
}

}  // namespace

double gemm_cell_bytes(const GemmCell& c) {
  const double a = static_cast<double>(c.m) * static_cast<double>(c.k);
  const double b = static_cast<double>(c.k) * static_cast<double>(c.n);
  const double out = static_cast<double>(c.m) * static_cast<double>(c.n);
  return (a + out) * bytes_of(storage_of(c.dtype)) + b * bytes_of(weight_storage_of(c.dtype));
}

Graph gemm_cells_graph(const std::vector<GemmCell>& cells) {
  Graph g = empty_graph("calibration-gemm");
  for (const GemmCell& c : cells) {
    const std::string tag = fmt::format("gemm_{}x{}x{}{}.{}", c.m, c.n, c.k, c.trans_b ? "_nt" : "", name_of(c.dtype));
    const int a = add(g, tag + ".a", {c.m, c.k}, storage_of(c.dtype), TensorRole::weight);
    const int b = add(g, tag + ".b", c.trans_b ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n},
                      weight_storage_of(c.dtype), TensorRole::weight);
    const int out = add(g, tag + ".c", {c.m, c.n}, storage_of(c.dtype), TensorRole::activation);
    Op op;
    op.name = tag;
    op.kind = OpKind::gemm;
    op.dtype = c.dtype;
    op.inputs = {a, b};
    op.outputs = {out};
    op.attrs.m = c.m;
    op.attrs.n = c.n;
    op.attrs.k = c.k;
    op.attrs.trans_b = c.trans_b;
    (void)g.add_op(std::move(op));
  }
  g.check();
  return g;
}

Graph launch_chain_graph(int ops, int64_t elements) {
  Graph g = empty_graph("calibration-launch");
  int prev = add(g, "chain.x", {elements}, DType::fp32, TensorRole::weight);
  const int b = add(g, "chain.b", {elements}, DType::fp32, TensorRole::weight);
  for (int i = 0; i < ops; ++i) {
    const int out = add(g, fmt::format("chain.{}", i), {elements}, DType::fp32, TensorRole::activation);
    Op op;
    op.name = fmt::format("chain.add{}", i);
    op.kind = OpKind::residual_add;
    op.dtype = DType::fp32;
    op.inputs = {prev, b};
    op.outputs = {out};
    op.attrs.elements = elements;
    (void)g.add_op(std::move(op));
    prev = out;
  }
  g.check();
  return g;
}

Graph upload_graph(const std::vector<double>& bytes, Residence from) {
  Graph g = empty_graph("calibration-copy");
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto elements = std::max<int64_t>(1, static_cast<int64_t>(bytes[i] / bytes_of(DType::fp32)));
    const std::string tag = fmt::format("upload{}.{}B", i, elements * 4);
    const int src = add(g, tag + ".host", {elements}, DType::fp32, TensorRole::input, from);
    const int dst = add(g, tag + ".device", {elements}, DType::fp32, TensorRole::input);
    Op op;
    op.name = tag;
    op.kind = OpKind::copy;
    op.dtype = DType::fp32;
    op.inputs = {src};
    op.outputs = {dst};
    op.attrs.elements = elements;
    (void)g.add_op(std::move(op));
  }
  g.check();
  return g;
}

std::vector<std::vector<std::size_t>> pack_interleaved(const std::vector<double>& bytes, double max_bytes) {
  std::vector<std::size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bytes[a] < bytes[b]; });
  // Smallest, largest, second smallest, second largest, ...
  std::vector<std::size_t> mixed;
  mixed.reserve(order.size());
  for (std::size_t lo = 0, hi = order.size(); lo < hi;) {
    mixed.push_back(order[lo++]);
    if (lo < hi) mixed.push_back(order[--hi]);
  }
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::size_t> cur;
  double used = 0;
  for (std::size_t i : mixed) {
    if (!cur.empty() && used + bytes[i] > max_bytes) {
      groups.push_back(std::move(cur));
      cur.clear();
      used = 0;
    }
    cur.push_back(i);
    used += bytes[i];
  }
  if (!cur.empty()) groups.push_back(std::move(cur));
  return groups;
}

}  // namespace perfsim
