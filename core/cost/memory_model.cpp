// The memory walk: persistent tensors live all step; each activation is allocated just before
// the op that first writes it and freed right after the last op that touches it (or kept to
// the end of the step, see last_use). Host tensors are summed apart, outside the device peak.
// Backends free on the same schedule (last_use), so predicted and measured peaks describe one
// thing.
#include "core/cost/memory_model.hpp"

#include "core/cost/workspace.hpp"

#include <fmt/format.h>

#include <algorithm>
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

// Layer sampling: an activation written by built layer l's forward with count c > 1 stands for
// c instances, one per real layer of the group that l represents. The real forward runs the
// group's layers one after another, so when the built layer runs, the c − 1 earlier instances
// already exist; the real backward meets the group's layers in reverse, so while the built
// layer's backward runs, the c − 1 other instances still exist. Both are the group's memory
// high-water marks. The walk therefore follows one instance op by op and holds the other c − 1
// from the first forward op of layer l until the last forward/backward op of layer l (or the
// tensor's last use, if later). Allocating all c at the writer and freeing all c at the last
// reader would instead free the whole group at once in backward and under-predict the peak.
struct SampledInstances {
  std::vector<char> sampled;   // per tensor: its other instances are held in alloc/release
  std::vector<double> alloc;   // per op: bytes of other instances allocated before it runs
  std::vector<double> release; // per op: bytes of other instances freed after it runs
};

SampledInstances sampled_instances(const Graph& g, const std::vector<int>& last) {
  SampledInstances s;
  const auto built = static_cast<std::size_t>(std::max<int64_t>(g.layers_built, 0));
  std::vector<int> first_forward(built, -1), last_pass(built, -1), writer(g.tensors.size(), -1);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    for (int id : op.outputs) {
      int& w = writer[checked_index(g, op, id)];
      if (w < 0) w = static_cast<int>(i);
    }
    if (op.layer < 0 || static_cast<std::size_t>(op.layer) >= built) continue;
    const auto l = static_cast<std::size_t>(op.layer);
    if (op.stage == Stage::forward && first_forward[l] < 0) first_forward[l] = static_cast<int>(i);
    if (op.stage == Stage::forward || op.stage == Stage::backward) last_pass[l] = static_cast<int>(i);
  }
  for (const Tensor& t : g.tensors) {
    const auto k = static_cast<std::size_t>(t.id);
    if (is_persistent(t) || t.on_host() || t.count <= 1 || writer[k] < 0) continue;
    const Op& w = g.ops[static_cast<std::size_t>(writer[k])];
    if (w.layer < 0 || static_cast<std::size_t>(w.layer) >= built || w.stage != Stage::forward)
      continue;
    const auto l = static_cast<std::size_t>(w.layer);
    if (s.sampled.empty()) {
      s.sampled.assign(g.tensors.size(), 0);
      s.alloc.assign(g.ops.size(), 0.0);
      s.release.assign(g.ops.size(), 0.0);
    }
    s.sampled[k] = 1;
    const double others = t.bytes() * (t.count - 1);
    s.alloc[static_cast<std::size_t>(first_forward[l])] += others;
    s.release[static_cast<std::size_t>(std::max(last_pass[l], last[k]))] += others;
  }
  return s;
}

MemoryBreakdown walk(const Graph& g, bool scaled, const Hardware* hw);

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
  for (const Tensor& t : g.tensors) {
    int& l = last[static_cast<std::size_t>(t.id)];
    // Program order says nothing about when a side-stream op runs: its operands stay.
    const bool side_stream = l >= 0 && g.ops[static_cast<std::size_t>(l)].stream > 0;
    if (is_persistent(t) || t.on_host() || side_stream) l = -1;
  }
  return last;
}

MemoryBreakdown predict_memory(const Graph& g, bool scaled) { return walk(g, scaled, nullptr); }

MemoryBreakdown predict_memory(const Graph& g, const Hardware& hw, bool scaled) { return walk(g, scaled, &hw); }

namespace {

MemoryBreakdown walk(const Graph& g, bool scaled, const Hardware* hw) {
  auto size_of = [scaled](const Tensor& t) { return scaled ? t.bytes() * t.count : t.bytes(); };

  std::array<double, role_count> persistent{};
  double persistent_total = 0, host = 0, host_pinned = 0;
  for (const Tensor& t : g.tensors) {
    if (t.on_host()) {
      host += size_of(t);
      if (t.residence == Residence::host_pinned) host_pinned += size_of(t);
    } else if (is_persistent(t)) {
      persistent[static_cast<std::size_t>(t.role)] += size_of(t);
      persistent_total += size_of(t);
    }
  }

  // Workspaces: the ones held all step join the persistent total; an op's own is live while
  // it runs (a side-stream op's stays until the end of the step).
  const PersistentWorkspace held_all_step = hw != nullptr ? persistent_workspace(g, *hw, scaled) : PersistentWorkspace{};
  const std::vector<double> op_workspace = hw != nullptr ? workspace_per_op(g, *hw) : std::vector<double>{};
  persistent[static_cast<std::size_t>(TensorRole::workspace)] = held_all_step.total();
  persistent_total += held_all_step.total();
  double held_workspace = 0, peak_workspace = 0;

  // The high-water mark, kept in scalars during the walk; the breakdown is built once at the end.
  double peak = persistent_total, peak_activations = 0;
  int peak_op = -1;

  const std::vector<int> last = last_use(g);
  const SampledInstances extra = scaled ? sampled_instances(g, last) : SampledInstances{};
  // Bytes of the walked instance: the other instances of a sampled layer's tensor are in `extra`.
  auto walked_size = [&](const Tensor& t) {
    const bool one = !extra.sampled.empty() && extra.sampled[static_cast<std::size_t>(t.id)];
    return one ? t.bytes() : size_of(t);
  };
  std::vector<char> allocated(g.tensors.size(), 0);
  double activations = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (!extra.alloc.empty()) activations += extra.alloc[i];
    // Outputs are allocated before the op runs (an in-place output already is). An activation
    // with last use -1 (read on a side stream) is allocated here and never freed.
    for (int id : op.outputs) {
      const Tensor& t = g.tensors[static_cast<std::size_t>(id)];
      if (is_persistent(t) || t.on_host() || allocated[static_cast<std::size_t>(id)]) continue;
      allocated[static_cast<std::size_t>(id)] = 1;
      activations += walked_size(t);
    }
    const double ws = op_workspace.empty() ? 0.0 : op_workspace[i];
    // Strictly greater: the peak is reported at the first op that reaches it.
    if (persistent_total + activations + held_workspace + ws > peak) {
      peak = persistent_total + activations + held_workspace + ws;
      peak_activations = activations;
      peak_workspace = held_workspace + ws;
      peak_op = static_cast<int>(i);
    }
    if (op.stream > 0) held_workspace += scaled ? ws * static_cast<double>(op.count) : ws;
    // Free every activation whose last use is this op (it is among the op's operands).
    auto release = [&](int id) {
      const auto k = static_cast<std::size_t>(id);
      if (!allocated[k] || last[k] != static_cast<int>(i)) return;
      allocated[k] = 0;
      activations -= walked_size(g.tensors[k]);
    };
    for (int id : op.inputs) release(id);
    for (int id : op.outputs) release(id);
    if (!extra.release.empty()) activations -= extra.release[i];
  }

  MemoryBreakdown m;
  m.peak = peak;
  // No activation ever raised the mark: the peak (persistent state) holds from the first op on.
  if (peak_op < 0 && !g.ops.empty()) peak_op = 0;
  if (peak_op >= 0) m.peak_at = g.ops[static_cast<std::size_t>(peak_op)].name;
  for (TensorRole r : all_tensor_roles) m.by_role[r] = persistent[static_cast<std::size_t>(r)];
  m.by_role[TensorRole::activation] = peak_activations;
  m.by_role[TensorRole::workspace] += peak_workspace;
  m.host_bytes = host;
  m.host_pinned_bytes = host_pinned;
  return m;
}

}  // namespace

}  // namespace perfsim
