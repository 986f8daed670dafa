// Collectives between CPU ranks (see cpu_collectives.hpp). Reductions run in
// fp32 whatever the tensors' storage (MPI has no 16-bit float type); gathers
// move the stored bytes.
#include "backends/cpu/cpu_collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/host_names.hpp"
#include "core/builders/streams.hpp"
#include "core/errors.hpp"
#include "core/graph/all_to_all.hpp"
#include "core/graph/pipeline_edge.hpp"

namespace perfsim::cpu {

namespace {

RankGroup group_of(const Op& op) { return RankGroup{op.attrs.group, op.attrs.group_stride}; }

// The flat part length of tensor `whole` over `parts` ranks (data_parallel's
// shard_of).
int64_t part_of(int64_t elements, int parts) { return (elements + parts - 1) / parts; }

std::size_t at(int id) { return static_cast<std::size_t>(id); }

// Message tags: ring attention's blocks go under 0.
constexpr int pipeline_activation_tag = 1;
constexpr int pipeline_gradient_tag = 2;

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

// An all-to-all (core/graph/all_to_all.hpp says which blocks): each block gathered from its runs
// in the tensor read into one buffer, member by member, the buffers exchanged, and each block
// received scattered into its runs in the tensor written. Bytes move as stored.
void all_to_all(const Op& op, const Graph& g, const std::vector<void*>& buf, Communicator& ranks) {
  const AllToAllBlocks b = all_to_all_blocks(op, g);
  const auto size = static_cast<int64_t>(bytes_of(storage_of(g.tensor(op.inputs[0]).dtype)));
  const int64_t block = b.elements * size;
  std::vector<char> send(static_cast<std::size_t>(block * b.parts)), recv(send.size());
  const auto* x = static_cast<const char*>(buf[at(op.inputs[0])]);
  auto* y = static_cast<char*>(buf[at(op.outputs[0])]);
  for (int p = 0; p < b.parts; ++p)
    for (int64_t r = 0; r < b.send.runs; ++r)
      std::memcpy(send.data() + p * block + r * b.send.run * size, x + (p * b.send.run + r * b.send.pitch) * size,
                  static_cast<std::size_t>(b.send.run * size));
  ranks.all_to_all(send.data(), recv.data(), block, group_of(op));
  for (int p = 0; p < b.parts; ++p)
    for (int64_t r = 0; r < b.recv.runs; ++r)
      std::memcpy(y + (p * b.recv.run + r * b.recv.pitch) * size, recv.data() + p * block + r * b.recv.run * size,
                  static_cast<std::size_t>(b.recv.run * size));
}

// A pipeline edge: the activation goes to the next stage in forward and its gradient to the
// previous one in backward (around the ring with interleaved chunks: pipeline_edge); a receive
// takes them from the other side. Activations and gradients travel under tags of their own: with
// interleaved chunks both may go from one rank to the same neighbour.
void send_recv(const Op& op, const Graph& g, const std::vector<void*>& buf, Communicator& ranks) {
  const PipelineEdge e = pipeline_edge(op, ranks.rank(), ranks.size());
  const int tag = e.backward ? pipeline_gradient_tag : pipeline_activation_tag;
  if (!op.inputs.empty()) ranks.send(buf[at(op.inputs[0])], stored_bytes(g.tensor(op.inputs[0])), e.peer, tag);
  else if (!op.outputs.empty()) ranks.recv(buf[at(op.outputs[0])], stored_bytes(g.tensor(op.outputs[0])), e.peer, tag);
}

// A step of ring attention (the context stream): the tensors it reads, end to end as stored, go
// to the next rank of the context-parallel group, and as many bytes from the previous one fill
// the tensors it writes, in order. Every rank sends before it receives: a send returns once
// its data is copied, so the ring cannot deadlock.
void ring_send_recv(const Op& op, const Graph& g, const std::vector<void*>& buf, Communicator& ranks) {
  const RankGroup ring = group_of(op);
  const int me = ranks.rank(), place = ring.place(me);
  int64_t sent_bytes = 0, received_bytes = 0;
  for (int id : op.inputs) sent_bytes += stored_bytes(g.tensor(id));
  for (int id : op.outputs) received_bytes += stored_bytes(g.tensor(id));
  if (sent_bytes != received_bytes)
    throw NotExecutable(fmt::format("ring step '{}': sends {} bytes, receives {}", op.name, sent_bytes, received_bytes));
  std::vector<char> data(static_cast<std::size_t>(sent_bytes));
  int64_t off = 0;
  for (int id : op.inputs) {
    const int64_t n = stored_bytes(g.tensor(id));
    std::memcpy(data.data() + off, buf[at(id)], static_cast<std::size_t>(n));
    off += n;
  }
  ranks.send(data.data(), sent_bytes, ring.member(me, (place + 1) % ring.size));
  ranks.recv(data.data(), received_bytes, ring.member(me, (place + ring.size - 1) % ring.size));
  off = 0;
  for (int id : op.outputs) {
    const int64_t n = stored_bytes(g.tensor(id));
    std::memcpy(buf[at(id)], data.data() + off, static_cast<std::size_t>(n));
    off += n;
  }
}

}  // namespace

std::string collective_unsupported_reason(const Op& op) {
  switch (op.attrs.collective) {
    case Collective::all_reduce:
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all:
      return {};
    case Collective::send_recv:
      // Pipeline edges and ring attention's steps; no other stream sends.
      if (is_pipeline_stream(op.stream) || op.stream == context_stream) return {};
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
    case Collective::all_to_all:
      all_to_all(op, g, buffers, ranks);
      return;
    case Collective::send_recv:
      if (op.stream == context_stream) ring_send_recv(op, g, buffers, ranks);
      else send_recv(op, g, buffers, ranks);
      return;
    default:
      return;
  }
}

}  // namespace perfsim::cpu
