// The blocks of an all-to-all op (see all_to_all.hpp).
#include "core/graph/all_to_all.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace perfsim {

namespace {

std::string dims(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

// The runs of a block `len` long along dimension d of a tensor of `shape`.
BlockRuns runs_along(const std::vector<int64_t>& shape, std::size_t d, int64_t len) {
  int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d; ++i) outer *= shape[i];
  for (std::size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  return BlockRuns{outer, len * inner, shape[d] * inner};
}

// The split and concatenation dimensions, or why there are none.
struct Dims {
  int split = -1, concat = -1;
  std::string why;
};

Dims find_dims(const Op& op, const Graph& g) {
  Dims d;
  if (op.inputs.size() != 1 || op.outputs.size() != 1) {
    d.why = fmt::format("all_to_all '{}' reads {} tensors and writes {}: one each", op.name, op.inputs.size(),
                        op.outputs.size());
    return d;
  }
  const Tensor& x = g.tensor(op.inputs[0]);
  const Tensor& y = g.tensor(op.outputs[0]);
  const int64_t n = op.attrs.group;
  auto unfit = [&] {
    return fmt::format("all_to_all '{}' over {} ranks cannot turn '{}' {} into '{}' {}: one dimension must "
                       "shrink {} times and another grow as much",
                       op.name, n, x.name, dims(x.shape), y.name, dims(y.shape), n);
  };
  if (x.shape.size() != y.shape.size() || x.shape.empty() || n < 1) {
    d.why = unfit();
    return d;
  }
  if (bytes_of(x.dtype) != bytes_of(y.dtype)) {
    d.why = fmt::format("all_to_all '{}': '{}' and '{}' are stored differently", op.name, x.name, y.name);
    return d;
  }
  for (std::size_t i = 0; i < x.shape.size(); ++i) {
    const int64_t a = x.shape[i], b = y.shape[i];
    if (a == b) continue;
    if (d.split < 0 && a == n * b) {
      d.split = static_cast<int>(i);
    } else if (d.concat < 0 && b == n * a) {
      d.concat = static_cast<int>(i);
    } else {
      d.why = unfit();
      return d;
    }
  }
  // Equal shapes: blocks along the first dimension both ways (the textbook all-to-all).
  if (d.split < 0 && d.concat < 0 && x.shape[0] % n == 0) d.split = d.concat = 0;
  if (d.split < 0 || d.concat < 0) d.why = unfit();
  return d;
}

}  // namespace

std::string all_to_all_unfit_reason(const Op& op, const Graph& g) { return find_dims(op, g).why; }

AllToAllBlocks all_to_all_blocks(const Op& op, const Graph& g) {
  const Dims d = find_dims(op, g);
  if (!d.why.empty()) throw NotExecutable(d.why);
  const Tensor& x = g.tensor(op.inputs[0]);
  const Tensor& y = g.tensor(op.outputs[0]);
  const int n = op.attrs.group;
  const auto s = static_cast<std::size_t>(d.split), c = static_cast<std::size_t>(d.concat);
  AllToAllBlocks b;
  b.parts = n;
  b.elements = x.elements() / n;
  b.send = runs_along(x.shape, s, x.shape[s] / n);
  b.recv = runs_along(y.shape, c, y.shape[c] / n);
  return b;
}

}  // namespace perfsim
