// Collectives between CPU ranks (see cpu_collectives.hpp). Reductions run in
// fp32 whatever the tensors' storage (MPI has no 16-bit float type); gathers
// move the stored bytes.
#include "backends/cpu/cpu_collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/scalar.hpp"
#include "core/build/streams.hpp"
#include "core/errors.hpp"

namespace perfsim::cpu {

namespace {

RankGroup group_of(const Op& op) { return RankGroup{op.attrs.group, op.attrs.group_stride}; }

// The flat part length of tensor `whole` over `parts` ranks (data_parallel's
// shard_of).
int64_t part_of(int64_t elements, int parts) { return (elements + parts - 1) / parts; }

std::size_t at(int id) { return static_cast<std::size_t>(id); }

int64_t stored_bytes(const Tensor& t) { return t.elements() * bytes_of(storage_of(t.dtype)); }

void check_pairs(const Op& op, const Graph& g, bool shards_written) {
  if (op.inputs.size() != op.outputs.size())
    throw NotExecutable(
        fmt::format("collective '{}': reads {} tensors, writes {}", op.name, op.inputs.size(), op.outputs.size()));
  const int parts = op.attrs.group;
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    const Tensor& whole = g.tensor(shards_written ? op.inputs[i] : op.outputs[i]);
    const Tensor& part = g.tensor(shards_written ? op.outputs[i] : op.inputs[i]);
    if (part.elements() != part_of(whole.elements(), parts))
      throw NotExecutable(fmt::format("collective '{}': '{}' ({} elements) is not a 1/{} part of '{}' ({})", op.name,
                                      part.name, part.elements(), parts, whole.name, whole.elements()));
  }
}

// The tensors `ids`, end to end, widened to fp32 (a reduction's operands).
std::vector<float> gather_floats(const Graph& g, const std::vector<int>& ids, const std::vector<void*>& buf) {
  int64_t total = 0;
  for (int id : ids) total += g.tensor(id).elements();
  std::vector<float> data(static_cast<std::size_t>(total));
  int64_t off = 0;
  for (int id : ids) {
    const Tensor& t = g.tensor(id);
    convert(buf[at(id)], storage_of(t.dtype), data.data() + off, Storage::f32, t.elements());
    off += t.elements();
  }
  return data;
}

// fp32 values, divided by the group when the op averages, back into the tensors `ids` in their storage.
void scatter_floats(const Op& op, const Graph& g, const std::vector<int>& ids, std::vector<float>& data,
                    const std::vector<void*>& buf) {
  if (op.attrs.average)
    for (float& x : data) x /= static_cast<float>(op.attrs.group);
  int64_t off = 0;
  for (int id : ids) {
    const Tensor& t = g.tensor(id);
    convert(data.data() + off, Storage::f32, buf[at(id)], storage_of(t.dtype), t.elements());
    off += t.elements();
  }
}

void all_reduce(const Op& op, const Graph& g, const std::vector<void*>& buf, Communicator& ranks) {
  int64_t total = 0, written = 0;
  for (int id : op.inputs) total += g.tensor(id).elements();
  for (int id : op.outputs) written += g.tensor(id).elements();
  if (total != written)
    throw NotExecutable(fmt::format("all_reduce '{}': reads {} elements, writes {}", op.name, total, written));
  std::vector<float> data = gather_floats(g, op.inputs, buf);
  ranks.all_reduce_sum(data.data(), total, group_of(op));
  scatter_floats(op, g, op.outputs, data, buf);
}

void reduce_scatter(const Op& op, const Graph& g, const std::vector<void*>& buf, Communicator& ranks) {
  check_pairs(op, g, true);
  const int parts = op.attrs.group;
  int64_t block = 0;  // this rank's elements over every tensor: one block of the send buffer
  for (int id : op.outputs) block += g.tensor(id).elements();
  // Block p holds part p of every whole tensor, in order, each padded to its
  // part length.
  std::vector<float> send(static_cast<std::size_t>(block * parts), 0.0f), mine(static_cast<std::size_t>(block));
  int64_t off = 0;
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    const Tensor& whole = g.tensor(op.inputs[i]);
    const std::vector<float> w = gather_floats(g, {op.inputs[i]}, buf);
    const int64_t len = part_of(whole.elements(), parts);
    for (int p = 0; p < parts; ++p) {
      const int64_t begin = p * len, n = std::min(len, whole.elements() - begin);
      if (n > 0)
        std::memcpy(send.data() + p * block + off, w.data() + begin, static_cast<std::size_t>(n) * sizeof(float));
    }
    off += len;
  }
  ranks.reduce_scatter_sum(send.data(), mine.data(), block, group_of(op));
  scatter_floats(op, g, op.outputs, mine, buf);
}

void all_gather(const Op& op, const Graph& g, const std::vector<void*>& buf, Communicator& ranks) {
  check_pairs(op, g, false);
  const int parts = op.attrs.group;
  int64_t block = 0;  // bytes of this rank's parts, end to end
  for (int id : op.inputs) block += stored_bytes(g.tensor(id));
  std::vector<char> send(static_cast<std::size_t>(block)), recv(static_cast<std::size_t>(block * parts));
  int64_t off = 0;
  for (int id : op.inputs) {
    const int64_t n = stored_bytes(g.tensor(id));
    std::memcpy(send.data() + off, buf[at(id)], static_cast<std::size_t>(n));
    off += n;
  }
  ranks.all_gather(send.data(), recv.data(), block, group_of(op));
  off = 0;
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    const Tensor& part = g.tensor(op.inputs[i]);
    const Tensor& whole = g.tensor(op.outputs[i]);
    if (storage_of(part.dtype) != storage_of(whole.dtype))
      throw NotExecutable(
          fmt::format("all_gather '{}': '{}' and '{}' are stored differently", op.name, part.name, whole.name));
    const auto size = static_cast<int64_t>(bytes_of(storage_of(whole.dtype)));
    const int64_t len = part.elements();
    auto* out = static_cast<char*>(buf[at(op.outputs[i])]);
    for (int p = 0; p < parts; ++p) {
      const int64_t begin = p * len, n = std::min(len, whole.elements() - begin);
      if (n > 0) std::memcpy(out + begin * size, recv.data() + p * block + off, static_cast<std::size_t>(n * size));
    }
    off += len * size;
  }
}

// A pipeline edge: the activation goes to the next stage in forward and its gradient to the
// previous one in backward; a receive takes them from the other side. Stages are
// attrs.group_stride (pp_stride) ranks apart.
void send_recv(const Op& op, const Graph& g, const std::vector<void*>& buf, Communicator& ranks) {
  const bool backward = op.stage == Stage::backward;
  const int stride = op.attrs.group_stride;
  if (!op.inputs.empty()) {
    const int to = ranks.rank() + (backward ? -stride : stride);
    ranks.send(buf[at(op.inputs[0])], stored_bytes(g.tensor(op.inputs[0])), to);
  } else if (!op.outputs.empty()) {
    const int from = ranks.rank() + (backward ? stride : -stride);
    ranks.recv(buf[at(op.outputs[0])], stored_bytes(g.tensor(op.outputs[0])), from);
  }
}

}  // namespace

std::string collective_unsupported_reason(const Op& op) {
  switch (op.attrs.collective) {
    case Collective::all_reduce:
    case Collective::reduce_scatter:
    case Collective::all_gather:
      return {};
    case Collective::send_recv:
      // Ring attention's K/V passes (context stream) are priced, not computed: its blocks merge
      // by a plain add in the graph, not the online-softmax correction.
      if (is_pipeline_stream(op.stream)) return {};
      break;
    case Collective::all_to_all:
      break;
  }
  return fmt::format("cpu ranks do not run {} yet ('{}')", name_of(op.attrs.collective), op.name);
}

void execute_collective(const Op& op, const Graph& g, const std::vector<void*>& buffers, Communicator& ranks) {
  if (const std::string why = collective_unsupported_reason(op); !why.empty()) throw NotExecutable(why);
  if (op.attrs.group <= 1) return;
  switch (op.attrs.collective) {
    case Collective::all_reduce:
      all_reduce(op, g, buffers, ranks);
      return;
    case Collective::reduce_scatter:
      reduce_scatter(op, g, buffers, ranks);
      return;
    case Collective::all_gather:
      all_gather(op, g, buffers, ranks);
      return;
    case Collective::send_recv:
      send_recv(op, g, buffers, ranks);
      return;
    default:
      return;
  }
}

}  // namespace perfsim::cpu
