// Host-data passes: pinned_memory (host tensors become page-locked) and prefetch (the next
// step's inputs are uploaded on a side stream while this step computes: double buffering).
#include <fmt/format.h>

#include <utility>
#include <vector>

#include "core/builders/streams.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/graph/rewrite.hpp"
#include "core/passes/pass_impl.hpp"

namespace perfsim::passes {

namespace {

// A pipeline stage other than the first (and, in training, the last) reads no data from the
// host: its input arrives from the previous stage. The stack is the same for every stage, so
// there the host-data passes have nothing to do rather than being a mistake.
bool receives_from_stage(const Graph& g) {
  for (const Op& op : g.ops)
    if (op.kind == OpKind::collective && op.attrs.collective == Collective::send_recv &&
        op.inputs.empty() && op.stage == Stage::forward)
      return true;
  return false;
}

}  // namespace

void apply_pinned_memory(Graph& g) {
  bool any = false;
  for (Tensor& t : g.tensors)
    if (t.on_host()) t.residence = Residence::host_pinned, any = true;
  if (!any && receives_from_stage(g)) return;
  if (!any)
    throw ConfigError(
        "pinned_memory: this step holds nothing in host memory; set host_data = true in the "
        "scenario");
}

void apply_prefetch(Graph& g) {
  // A side stream carries the prefetches; stream 0 keeps the compute.
  std::vector<Op> prefetches, rest;
  for (Op& op : g.ops) {
    if (op.kind != OpKind::copy || copy_direction(op, g) != CopyDirection::upload) {
      rest.push_back(std::move(op));
      continue;
    }
    const Tensor& src = g.tensor(op.inputs.front());
    if (src.residence != Residence::host_pinned)
      throw ConfigError(
          "prefetch needs pinned_memory earlier in the stack: a copy from pageable memory "
          "blocks the host, so it cannot overlap compute");
    // This step's input was uploaded by the previous step, so `dst` is simply there; the
    // upload fills a second buffer for the next step: double buffering, visible in memory.
    Tensor next = g.tensor(op.outputs.front());
    next.name += ".next";
    next.role = TensorRole::input;
    next.residence = Residence::device;
    const std::string dst_name = g.tensor(op.outputs.front()).name;
    op.outputs = {g.add_tensor(std::move(next))};
    op.name = "prefetch." + dst_name;
    op.stream = copy_stream;
    prefetches.push_back(std::move(op));  // same count as the upload it replaces
  }
  if (prefetches.empty() && receives_from_stage(g)) {
    g.ops = std::move(rest);
    return;
  }
  if (prefetches.empty())
    throw ConfigError(
        "prefetch: this step uploads nothing from the host; set host_data = true in the "
        "scenario");
  // Issued at the very start of the step, so nothing on stream 0 holds them back.
  for (Op& op : rest) prefetches.push_back(std::move(op));
  g.ops = std::move(prefetches);
  renumber_ops(g);
}

}  // namespace perfsim::passes
