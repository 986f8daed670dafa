// The memory walk: persistent tensors live all step; each activation is allocated just before
// the op that first writes it and freed right after the last op that touches it. Backends
// free on the same schedule (last_use), so predicted and measured peaks describe one thing.
#include "core/memory_model.hpp"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

namespace perfsim {

namespace {

constexpr std::size_t role_count = std::size(all_tensor_roles);

std::size_t checked_index(const Graph& g, const Op& op, int id) {
  if (id < 0 || static_cast<std::size_t>(id) >= g.tensors.size())
    throw std::logic_error(
        fmt::format("memory model: op '{}' uses unknown tensor {}", op.name, id));
  return static_cast<std::size_t>(id);
}

}  // namespace

std::vector<int> last_use(const Graph& g) {
  std::vector<int> last(g.tensors.size(), -1);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    // The last op touching an activation, reading or writing: an output nobody reads dies
    // after its writer, one written in place survives until its last writer.
    for (int id : op.inputs) last[checked_index(g, op, id)] = static_cast<int>(i);
    for (int id : op.outputs) last[checked_index(g, op, id)] = static_cast<int>(i);
  }
  for (const Tensor& t : g.tensors)
    if (is_persistent(t.role)) last[static_cast<std::size_t>(t.id)] = -1;
  return last;
}

MemoryBreakdown predict_memory(const Graph& g, bool scaled) {
  auto size_of = [scaled](const Tensor& t) { return scaled ? t.bytes() * t.count : t.bytes(); };

  std::array<double, role_count> persistent{};
  double persistent_total = 0;
  for (const Tensor& t : g.tensors)
    if (is_persistent(t.role)) {
      persistent[static_cast<std::size_t>(t.role)] += size_of(t);
      persistent_total += size_of(t);
    }

  // The high-water mark, kept in scalars during the walk; the breakdown is built once at the end.
  double peak = persistent_total, peak_activations = 0;
  int peak_op = -1;

  const std::vector<int> last = last_use(g);
  std::vector<char> allocated(g.tensors.size(), 0);
  double activations = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    // Outputs are allocated before the op runs (an in-place output already is).
    for (int id : op.outputs) {
      const Tensor& t = g.tensors[static_cast<std::size_t>(id)];
      if (is_persistent(t.role) || allocated[static_cast<std::size_t>(id)]) continue;
      allocated[static_cast<std::size_t>(id)] = 1;
      activations += size_of(t);
    }
    // Strictly greater: the peak is reported at the first op that reaches it.
    if (persistent_total + activations > peak) {
      peak = persistent_total + activations;
      peak_activations = activations;
      peak_op = static_cast<int>(i);
    }
    // Free every activation whose last use is this op (it is among the op's operands).
    auto release = [&](int id) {
      const auto k = static_cast<std::size_t>(id);
      if (!allocated[k] || last[k] != static_cast<int>(i)) return;
      allocated[k] = 0;
      activations -= size_of(g.tensors[k]);
    };
    for (int id : op.inputs) release(id);
    for (int id : op.outputs) release(id);
  }

  MemoryBreakdown m;
  m.peak = peak;
  // No activation ever raised the mark: the peak (persistent state) holds from the first op on.
  if (peak_op < 0 && !g.ops.empty()) peak_op = 0;
  if (peak_op >= 0) m.peak_at = g.ops[static_cast<std::size_t>(peak_op)].name;
  for (TensorRole r : all_tensor_roles) m.by_role[r] = persistent[static_cast<std::size_t>(r)];
  m.by_role[TensorRole::activation] = peak_activations;
  return m;
}

}  // namespace perfsim
