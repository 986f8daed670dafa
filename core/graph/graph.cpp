#include "core/graph/graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/errors.hpp"

namespace perfsim {

const char* name_of(TensorRole r) {
  switch (r) {
    case TensorRole::weight: return "weights";
    case TensorRole::master_weight: return "master_weights";
    case TensorRole::gradient: return "gradients";
    case TensorRole::optimizer_state: return "optimizer_states";
    case TensorRole::kv_cache: return "kv_cache";
    case TensorRole::input: return "inputs";
    case TensorRole::activation: return "activations";
    case TensorRole::workspace: return "workspace";
  }
  return "?";
}

const char* name_of(Residence r) {
  switch (r) {
    case Residence::device: return "device";
    case Residence::host_pageable: return "host (pageable)";
    case Residence::host_pinned: return "host (pinned)";
  }
  return "?";
}

bool is_persistent(TensorRole r) { return r != TensorRole::activation; }
bool is_persistent(const Tensor& t) { return !t.transient && is_persistent(t.role); }

const char* name_of(Stage s) {
  switch (s) {
    case Stage::forward: return "forward";
    case Stage::backward: return "backward";
    case Stage::optimizer: return "optimizer";
    case Stage::other: return "other";
  }
  return "?";
}

void for_each_whole_run(const std::vector<int64_t>& shape, const Shard* shard, int place,
                        const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  int64_t local = 1;
  for (int64_t d : shape) local *= d;
  if (shard == nullptr || shard->parts * shard->micros <= 1) {
    if (local > 0) fn(0, 0, local);
    return;
  }
  // A micro-batch's part: the rank's part cut once more.
  const int parts = shard->parts * shard->micros;
  place = place * shard->micros + shard->micro;
  int64_t whole = 1;
  for (int64_t d : shard->whole) whole *= d;
  if (shard->dim < 0) {
    const int64_t part = (whole + parts - 1) / parts;
    const int64_t begin = static_cast<int64_t>(place) * part;
    const int64_t n = std::min(part, whole - begin);
    if (n > 0) fn(0, begin, n);
    return;
  }
  const auto dim = static_cast<std::size_t>(shard->dim);
  // Load-balanced chunks: 2·parts of them, two a part; micro-batches cut another level.
  const int pieces = shard->balanced ? 2 * parts : parts;
  if (dim >= shard->whole.size() || shard->whole[dim] % pieces != 0 || (shard->balanced && shard->micros > 1))
    throw std::logic_error(fmt::format("shard of '{}': dimension {} does not split into {} {}", shard->of,
                                       shard->dim, pieces, shard->balanced ? "balanced chunks" : "parts"));
  int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < dim; ++i) outer *= shard->whole[i];
  for (std::size_t i = dim + 1; i < shard->whole.size(); ++i) inner *= shard->whole[i];
  const int64_t piece = shard->whole[dim] / pieces;
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t base = o * shard->whole[dim];
    if (!shard->balanced) {
      fn(o * piece * inner, (base + static_cast<int64_t>(place) * piece) * inner, piece * inner);
      continue;
    }
    fn(2 * o * piece * inner, (base + static_cast<int64_t>(place) * piece) * inner, piece * inner);
    fn((2 * o + 1) * piece * inner, (base + static_cast<int64_t>(pieces - 1 - place) * piece) * inner,
       piece * inner);
  }
}

int place_of(const Shard& s, int rank) { return s.parts > 0 && s.stride > 0 ? (rank / s.stride) % s.parts : 0; }

namespace {

struct Run {
  int64_t local, whole, count;
};

std::vector<Run> runs_of(const std::vector<int64_t>& shape, const Shard* shard, int place) {
  std::vector<Run> runs;
  for_each_whole_run(shape, shard, place,
                     [&](int64_t local, int64_t whole, int64_t count) { runs.push_back({local, whole, count}); });
  return runs;
}

}  // namespace

void for_each_whole_run(const Tensor& t, int rank, const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  if (t.shard.size() <= 1) {
    const Shard* s = t.shard.empty() ? nullptr : &t.shard.front();
    for_each_whole_run(t.shape, s, s != nullptr ? place_of(*s, rank) : 0, fn);
    return;
  }
  // The innermost level's runs lie in the part the level before leaves (that level's local
  // offsets); each level outwards maps them into its own whole, splitting a run where the
  // outer level's runs break.
  const std::size_t levels = t.shard.size();
  std::vector<Run> runs = runs_of(t.shape, &t.shard[levels - 1], place_of(t.shard[levels - 1], rank));
  for (std::size_t l = levels - 1; l-- > 0;) {
    const Shard& outer = t.shard[l];
    const std::vector<Run> map = runs_of(t.shard[l + 1].whole, &outer, place_of(outer, rank));
    std::vector<Run> mapped;
    for (const Run& r : runs) {
      // The outer runs are in order of their local offsets: the first that ends past r's start.
      auto it = std::upper_bound(map.begin(), map.end(), r.whole,
                                 [](int64_t at, const Run& m) { return at < m.local + m.count; });
      for (int64_t done = 0; done < r.count && it != map.end(); ++it) {
        const int64_t from = r.whole + done;
        if (from < it->local) break;  // a gap: past the outer part (padding)
        const int64_t n = std::min(r.count - done, it->local + it->count - from);
        mapped.push_back({r.local + done, it->whole + (from - it->local), n});
        done += n;
      }
    }
    runs = std::move(mapped);
  }
  for (const Run& r : runs) fn(r.local, r.whole, r.count);
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) {
      std::string dims;
      for (int64_t e : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(e);
      throw ConfigError(fmt::format("tensor '{}' of shape [{}] has more elements than int64 holds; "
                                    "lower the sizes behind it (batch, sequence lengths, model sizes)",
                                    name, dims));
    }
  return n;
}

int Graph::find_tensor(std::string_view name) const {
  for (const Tensor& t : tensors)
    if (t.name == name) return t.id;
  return -1;
}

int Graph::add_tensor(Tensor t) {
  (void)t.elements();  // a shape whose element count overflows is refused where it is made
  t.id = static_cast<int>(tensors.size());
  tensors.push_back(std::move(t));
  return tensors.back().id;
}

int Graph::add_op(Op op) {
  op.id = static_cast<int>(ops.size());
  ops.push_back(std::move(op));
  return ops.back().id;
}

double Graph::layer_scale() const {
  return layers_built > 0 ? static_cast<double>(layers_total) / static_cast<double>(layers_built)
                          : 1.0;
}

std::string kv_block_error(const Op& op) {
  const int64_t block = op.attrs.kv_block;
  if (reads_kv_pages(op.kind) && block <= 0)
    return fmt::format("op '{}' ({}) reads KV pages, but its attribute kv_block (rows per page) is {}", op.name,
                       name_of(op.kind), block);
  if (!reads_kv_pages(op.kind) && block != 0) {
    const std::optional<OpKind> paged = paged_kind_of(op.kind);
    return fmt::format("op '{}' ({}) has kv_block = {}, but {} reads no KV pages{}", op.name, name_of(op.kind), block,
                       name_of(op.kind),
                       paged ? fmt::format(": a paged cache is read by {} (the paged_kv pass)", name_of(*paged)) : "");
  }
  return {};
}

void Graph::check() const {
  std::vector<bool> written(tensors.size(), false);
  for (const auto& t : tensors) {
    if (t.id < 0 || static_cast<std::size_t>(t.id) >= tensors.size())
      throw std::logic_error(fmt::format("graph: tensor '{}' has a bad id", t.name));
    if (is_persistent(t)) written[static_cast<std::size_t>(t.id)] = true;
    for (int64_t d : t.shape)
      if (d <= 0) throw std::logic_error(fmt::format("graph: tensor '{}' has a dimension <= 0", t.name));
    (void)t.elements();  // ConfigError when a pass made the shape overflow
  }
  for (const auto& op : ops) {
    if (std::string why = kv_block_error(op); !why.empty()) throw std::logic_error("graph: " + why);
    for (int id : op.inputs) {
      if (id < 0 || static_cast<std::size_t>(id) >= tensors.size())
        throw std::logic_error(fmt::format("graph: op '{}' reads unknown tensor {}", op.name, id));
      if (!written[static_cast<std::size_t>(id)])
        throw std::logic_error(fmt::format("graph: op '{}' reads '{}' before it is written",
                                           op.name, tensor(id).name));
    }
    for (int id : op.outputs) {
      if (id < 0 || static_cast<std::size_t>(id) >= tensors.size())
        throw std::logic_error(fmt::format("graph: op '{}' writes unknown tensor {}", op.name, id));
      written[static_cast<std::size_t>(id)] = true;
    }
  }
}

}  // namespace perfsim
