// Initial values of persistent tensors (see tensor_init.hpp). Each tensor is split into
// fixed chunks with their own generator seeded from (seed, tensor, chunk), so the values do
// not depend on which thread fills which chunk.
#include "backends/common/tensor_init.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>

#include "backends/common/parallel.hpp"
#include "backends/common/quantized_weights.hpp"
#include "backends/common/scalar.hpp"

namespace perfsim::host {

namespace {

constexpr int64_t chunk = 1 << 16;

// splitmix64 (Steele, Lea & Flood 2014): a small, well-mixed 64-bit generator.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1].
  double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53; }
};

// The vocabulary an int32 tensor indexes: the table of an embedding that reads it, or the
// logits width of a cross-entropy that takes it as targets.
int64_t vocab_of(const Graph& g, int id) {
  for (const Op& op : g.ops) {
    if (op.inputs.empty()) continue;
    // A vocabulary split among ranks: the whole one's (ids are global).
    auto whole = [](const Tensor& t) -> const std::vector<int64_t>& {
      return t.shard.empty() ? t.shape : t.shard.front().whole;
    };
    if (op.kind == OpKind::embedding && op.inputs[0] == id && op.inputs.size() > 1)
      return whole(g.tensor(op.inputs[1])).front();
    if (op.kind == OpKind::embedding_bwd && op.inputs[0] == id && !op.outputs.empty())
      return whole(g.tensor(op.outputs[0])).front();
    if (op.kind == OpKind::cross_entropy && op.inputs.size() > 1 && op.inputs[1] == id)
      return whole(g.tensor(op.inputs[0])).back();
  }
  return 1;
}

// Whether an int32 tensor is the block table of a paged cache (the last input of an op that
// reads KV pages).
bool is_block_table(const Graph& g, int id) {
  for (const Op& op : g.ops)
    if (reads_kv_pages(op.kind) && !op.inputs.empty() && op.inputs.back() == id) return true;
  return false;
}

// The op reading an int32 tensor as a mixture-of-experts routing input (experts or slots),
// and which of the two; nullptr when none does.
const Op* moe_reader(const Graph& g, int id, bool& is_slots) {
  for (const Op& op : g.ops) {
    int experts_at = -1, slots_at = -1;  // input positions (core/graph/op_kind.hpp)
    switch (op.kind) {
      case OpKind::moe_route_bwd: experts_at = 1; break;
      case OpKind::moe_dispatch:
      case OpKind::moe_dispatch_bwd:
      case OpKind::moe_combine: experts_at = 1, slots_at = 2; break;
      case OpKind::moe_combine_bwd: experts_at = 2, slots_at = 3; break;
      default: continue;
    }
    for (int at : {experts_at, slots_at}) {
      if (at < 0 || static_cast<std::size_t>(at) >= op.inputs.size() || op.inputs[static_cast<std::size_t>(at)] != id)
        continue;
      is_slots = at == slots_at;
      return &op;
    }
  }
  return nullptr;
}

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// The k-th output (from 0) of SplitMix seeded with `state`: SplitMix is counter-based, so any
// element's value is computed without the ones before it (a shard fills only its own part).
uint64_t splitmix_at(uint64_t state, int64_t k) {
  return SplitMix{state + static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ull}.next();
}

// Approximately normal values at one generator call per element: the sum of four 16-bit
// uniforms (Irwin-Hall, n = 4) has mean 2 and variance 1/3; centred and scaled it has unit
// variance and is bounded by ±3.46σ, which is all timing runs need (finite, weight-like values)
// and several times cheaper than Box-Muller, which dominated start-up on large models.
// Element i of the whole tensor comes from chunk i / chunk's own generator.
float normal_at(uint64_t seed, int64_t i, float stddev) {
  const int64_t c = i / chunk;
  const uint64_t r = splitmix_at(seed ^ (static_cast<uint64_t>(c) * 0xd1b54a32d192ed03ull), i - c * chunk);
  const int64_t sum = static_cast<int64_t>(r & 0xffff) + static_cast<int64_t>((r >> 16) & 0xffff) +
                      static_cast<int64_t>((r >> 32) & 0xffff) + static_cast<int64_t>(r >> 48);
  return stddev * 1.7320508f / 65536.0f * static_cast<float>(sum - 131070);  // mean 4 · 32767.5
}

// Value x as T stores it: an fp8 tensor (a KV cache under fp8_kv) holds x / scale, so that
// its readers' stored · scale gives x back (to fp8's precision).
template <class T>
T stored(float x, float scale) {
  if constexpr (std::is_same_v<T, fp8_e4m3>) return fp8_e4m3(x / scale);
  else return from_f32<T>(x);
}

// Elements [local, local + n) of `data` get the whole tensor's elements [whole, whole + n).
template <class T>
void fill_run(T* data, int64_t local, int64_t whole, int64_t n, const InitSpec& spec, uint64_t seed,
              float scale = 1) {
  switch (spec.kind) {
    case InitKind::normal:
      parallel_for((n + chunk - 1) / chunk, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t i = c0 * chunk; i < std::min(n, c1 * chunk); ++i)
          data[local + i] = stored<T>(normal_at(seed, whole + i, spec.stddev), scale);
      });
      return;
    case InitKind::ones: std::fill(data + local, data + local + n, stored<T>(1.0f, scale)); return;
    default: std::fill(data + local, data + local + n, stored<T>(0.0f, scale)); return;
  }
}

// Round-robin routing (InitKind::expert_ids / expert_slots).
void fill_routing(int32_t* data, int64_t n, const InitSpec& spec) {
  const int64_t e = std::max<int64_t>(1, spec.experts);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = spec.kind == InitKind::expert_ids ? i % e : (i / e < spec.capacity ? i / e : -1);
    data[i] = static_cast<int32_t>(v);
  }
}

void fill_ids(int32_t* data, int64_t local, int64_t whole, int64_t n, int64_t vocab, uint64_t seed) {
  for (int64_t i = 0; i < n; ++i)
    data[local + i] = static_cast<int32_t>(splitmix_at(seed, whole + i) % static_cast<uint64_t>(vocab));
}

// Fisher-Yates shuffle of 0 .. n − 1.
void fill_permutation(int32_t* data, int64_t n, uint64_t seed) {
  SplitMix rng{seed};
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<int32_t>(i);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(data[i], data[rng.next() % static_cast<uint64_t>(i + 1)]);
}

}  // namespace

float kv_scale_of(const Graph& g, int id) {
  for (const Op& op : g.ops)
    for (const std::vector<int>* ids : {&op.inputs, &op.outputs})
      if (std::find(ids->begin(), ids->end(), id) != ids->end())
        return op.attrs.kv_scale > 0 ? static_cast<float>(op.attrs.kv_scale) : 1.0f;
  return 1.0f;
}

std::string data_name(const Tensor& t) {
  constexpr std::string_view suffix = ".host";
  const std::string_view n = t.name;
  if (t.on_host() && n.size() > suffix.size() && n.substr(n.size() - suffix.size()) == suffix)
    return std::string(n.substr(0, n.size() - suffix.size()));
  return t.name;
}

InitSpec init_spec(const Graph& g, const Tensor& t) {
  if (t.on_host()) {
    // Initialized as the device tensor whose data it holds, when the graph has one.
    const std::string twin = data_name(t);
    for (const Tensor& d : g.tensors)
      if (!d.on_host() && d.name == twin) return init_spec(g, d);
  }
  InitSpec s;
  if (t.dtype == DType::int32 && is_block_table(g, t.id)) {
    s.kind = InitKind::block_table;
    return s;
  }
  bool is_slots = false;
  if (const Op* moe = t.dtype == DType::int32 ? moe_reader(g, t.id, is_slots) : nullptr) {
    s.kind = is_slots ? InitKind::expert_slots : InitKind::expert_ids;
    s.experts = moe->attrs.experts;
    s.capacity = moe->attrs.capacity;
    return s;
  }
  if (t.dtype == DType::int32) {
    s.kind = InitKind::token_ids;
    s.vocab = std::max<int64_t>(1, vocab_of(g, t.id));
    return s;
  }
  switch (t.role) {
    case TensorRole::weight:
    case TensorRole::master_weight:
      // 1-D parameters are norm gains (1) and biases (0); matrices N(0, 0.02) as GPT-2 does.
      if ((t.shard.empty() ? t.shape : t.shard.front().whole).size() == 1)
        s.kind = contains(t.name, "bias") || contains(t.name, "beta") ? InitKind::zeros : InitKind::ones;
      return s;
    case TensorRole::gradient:  // a step starts from zeroed gradients (zero_grad)
    case TensorRole::optimizer_state: s.kind = InitKind::zeros; return s;
    case TensorRole::kv_cache:
    case TensorRole::input:
    case TensorRole::activation:
    case TensorRole::workspace:  // no tensor carries it: the label of workspace bytes
      s.stddev = 1.0f;
      return s;
  }
  return s;
}

void fill_persistent(const Graph& g, const std::vector<void*>& buffers, uint64_t seed, int rank) {
  for (const Tensor& t : g.tensors) {
    if (!is_persistent(t)) continue;
    void* p = buffers.at(static_cast<std::size_t>(t.id));
    if (p == nullptr) continue;
    const InitSpec spec = init_spec(g, t);
    const Shard* shard = t.shard.empty() ? nullptr : &t.shard.front();
    // Seeded by name, not id: a pass that renumbers tensors keeps every tensor's values. A
    // shard takes its whole's values.
    uint64_t name_hash = 0xcbf29ce484222325ull;  // FNV-1a
    for (char ch : shard != nullptr ? shard->of : data_name(t))
      name_hash = (name_hash ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
    const uint64_t tseed = SplitMix{seed ^ name_hash}.next();
    const int64_t n = t.elements();
    const Storage storage = storage_of(t.dtype);
    if (storage == Storage::i32 && spec.kind != InitKind::token_ids) {
      auto* data = static_cast<int32_t*>(p);
      if (spec.kind == InitKind::block_table) fill_permutation(data, n, tseed);
      else fill_routing(data, n, spec);
      continue;
    }
    if (const QuantLayout q = quant_layout(t); q.k > 0) {
      fill_quantized(p, q, tseed);
      continue;
    }
    if (storage == Storage::unsupported) continue;
    // A padded shard's tail is not in the whole: zeros.
    const int64_t bytes = n * static_cast<int64_t>(bytes_of(t.dtype));
    if (shard != nullptr) std::memset(p, 0, static_cast<std::size_t>(bytes));
    const float scale = storage == Storage::f8e4m3 ? kv_scale_of(g, t.id) : 1.0f;
    for_each_whole_run(t, rank, [&](int64_t local, int64_t whole, int64_t count) {
      switch (storage) {
        case Storage::f32: fill_run(static_cast<float*>(p), local, whole, count, spec, tseed); break;
        case Storage::bf16: fill_run(static_cast<bf16*>(p), local, whole, count, spec, tseed); break;
        case Storage::f16: fill_run(static_cast<half*>(p), local, whole, count, spec, tseed); break;
        case Storage::f8e4m3: fill_run(static_cast<fp8_e4m3*>(p), local, whole, count, spec, tseed, scale); break;
        case Storage::i32: fill_ids(static_cast<int32_t*>(p), local, whole, count, spec.vocab, tseed); break;
        case Storage::unsupported: break;
      }
    });
  }
}

}  // namespace perfsim::host
