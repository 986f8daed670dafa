// Memory model: the liveness walk on a hand graph with a known peak, scaled vs as built,
// in-place and duplicate operands, agreement with a brute-force interval count, and layer
// sampling (a sampled graph predicts the full model's peak).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "core/cost/memory_model.hpp"

using namespace perfsim;

namespace {

int tensor(Graph& g, const char* name, std::vector<int64_t> shape, TensorRole role,
           double count = 1) {
  return g.add_tensor({-1, name, std::move(shape), DType::fp32, role, count});
}

void op(Graph& g, const char* name, std::vector<int> in, std::vector<int> out) {
  Op o;
  o.name = name;
  o.kind = OpKind::residual_add;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  g.add_op(o);
}

// w[4,4] weight 64 B, x[2,4] input 32 B; a[2,4] 32 B, b[2,8] 64 B, c[2,2] 16 B.
// op0: x,w -> a | op1: a -> b | op2: b -> c.
Graph three_ops(double w_count = 1, double b_count = 1) {
  Graph g;
  const int w = tensor(g, "w", {4, 4}, TensorRole::weight, w_count);
  const int x = tensor(g, "x", {2, 4}, TensorRole::input);
  const int a = tensor(g, "a", {2, 4}, TensorRole::activation);
  const int b = tensor(g, "b", {2, 8}, TensorRole::activation, b_count);
  const int c = tensor(g, "c", {2, 2}, TensorRole::activation);
  op(g, "op0", {x, w}, {a});
  op(g, "op1", {a}, {b});
  op(g, "op2", {b}, {c});
  return g;
}

}  // namespace

TEST_CASE("last_use: last reader, writer-only outputs, persistent never freed") {
  const Graph g = three_ops();
  CHECK(last_use(g) == std::vector<int>{-1, -1, 1, 2, 2});
}

TEST_CASE("memory walk: peak and where it happens on a 3-op graph") {
  // Live bytes: op0 96 + a 32 = 128; op1 96 + a 32 + b 64 = 192; op2 96 + b 64 + c 16 = 176.
  const MemoryBreakdown m = predict_memory(three_ops(), false);
  CHECK(m.peak == 192);
  CHECK(m.peak_at == "op1");
  CHECK(m.by_role.at(TensorRole::weight) == 64);
  CHECK(m.by_role.at(TensorRole::input) == 32);
  CHECK(m.by_role.at(TensorRole::activation) == 96);
  CHECK(m.by_role.at(TensorRole::kv_cache) == 0);
}

TEST_CASE("memory walk: scaled applies tensor counts, unscaled ignores them") {
  // w stands for 4 layers' weights, b is a saved activation standing for 2.
  const Graph g = three_ops(4, 2);
  const MemoryBreakdown as_built = predict_memory(g, false);
  CHECK(as_built.peak == 192);
  // Scaled: persistent 4·64 + 32 = 288; op1: 288 + 32 + 2·64 = 448; op2: 288 + 128 + 16 = 432.
  const MemoryBreakdown scaled = predict_memory(g, true);
  CHECK(scaled.peak == 448);
  CHECK(scaled.peak_at == "op1");
  CHECK(scaled.by_role.at(TensorRole::weight) == 256);
  CHECK(scaled.by_role.at(TensorRole::activation) == 160);
}

TEST_CASE("memory walk: in-place, duplicate operands and persistent outputs") {
  Graph g;
  const int cache = tensor(g, "cache", {16}, TensorRole::kv_cache);  // 64 B
  const int x = tensor(g, "x", {4}, TensorRole::input);              // 16 B
  const int a = tensor(g, "a", {8}, TensorRole::activation);         // 32 B
  const int s = tensor(g, "s", {8}, TensorRole::activation);         // 32 B
  op(g, "write_a", {x}, {a});
  op(g, "append", {a, cache}, {cache});  // writes a persistent tensor: nothing allocated
  op(g, "double", {a, a}, {s});          // a read twice, freed once
  op(g, "scale_in_place", {s}, {s});     // s written in place: not allocated twice
  CHECK(last_use(g) == std::vector<int>{-1, -1, 2, 3});
  const MemoryBreakdown m = predict_memory(g, false);
  CHECK(m.peak == 64 + 16 + 32 + 32);
  CHECK(m.peak_at == "double");
  CHECK(m.by_role.at(TensorRole::kv_cache) == 64);
}

TEST_CASE("memory walk: persistent state only, and an empty graph") {
  Graph g;
  const int w = tensor(g, "w", {10}, TensorRole::weight, 3);
  op(g, "reads_w", {w}, {});
  const MemoryBreakdown m = predict_memory(g, true);
  CHECK(m.peak == 120);
  CHECK(m.peak_at == "reads_w");
  Graph empty;
  tensor(empty, "w", {10}, TensorRole::optimizer_state);
  CHECK(predict_memory(empty).peak == 40);
  CHECK(predict_memory(empty).peak_at.empty());
}

TEST_CASE("memory walk agrees with brute-force lifetimes on random graphs") {
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {  // LCG (Knuth MMIX constants): reproducible, no <random> seeding
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  for (int trial = 0; trial < 50; ++trial) {
    Graph g;
    std::vector<int> readable;
    for (int i = 0; i < 3; ++i)
      readable.push_back(g.add_tensor({-1,
                                       "p",
                                       {static_cast<int64_t>(1 + next(64))},
                                       DType::fp32,
                                       TensorRole::weight,
                                       static_cast<double>(1 + next(4))}));
    const int n_ops = 5 + static_cast<int>(next(30));
    for (int i = 0; i < n_ops; ++i) {
      Op o;
      o.name = "op" + std::to_string(i);
      const int n_in = 1 + static_cast<int>(next(3));
      for (int k = 0; k < n_in; ++k) o.inputs.push_back(readable[next(readable.size())]);
      const int fresh = g.add_tensor({-1,
                                      "t",
                                      {static_cast<int64_t>(1 + next(256))},
                                      DType::fp32,
                                      TensorRole::activation,
                                      static_cast<double>(1 + next(3))});
      o.outputs.push_back(fresh);
      if (next(4) == 0) o.outputs.push_back(o.inputs.front());  // in-place update
      readable.push_back(fresh);
      g.add_op(o);
    }
    for (bool scaled : {false, true}) {
      // Brute force: an activation is live at op i when first write <= i <= last touch.
      const std::size_t nt = g.tensors.size();
      std::vector<int> first(nt, -1), last(nt, -1);
      for (std::size_t i = 0; i < g.ops.size(); ++i) {
        for (int id : g.ops[i].outputs)
          if (first[id] < 0) first[id] = static_cast<int>(i);
        for (int id : g.ops[i].inputs) last[id] = static_cast<int>(i);
        for (int id : g.ops[i].outputs) last[id] = static_cast<int>(i);
      }
      double persistent = 0, best = -1;
      int best_at = -1;
      for (const Tensor& t : g.tensors)
        if (is_persistent(t)) persistent += t.bytes() * (scaled ? t.count : 1);
      for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
        double live = persistent;
        for (const Tensor& t : g.tensors)
          if (!is_persistent(t) && first[t.id] >= 0 && first[t.id] <= i && i <= last[t.id])
            live += t.bytes() * (scaled ? t.count : 1);
        if (live > best) {
          best = live;
          best_at = i;
        }
      }
      const MemoryBreakdown m = predict_memory(g, scaled);
      CHECK(m.peak == best);
      CHECK(m.peak_at == g.ops[static_cast<std::size_t>(best_at)].name);
    }
  }
}

namespace {

// A 4-layer chain built with `built` layers (each standing for 4/built), every tensor 10 fp32
// (40 B) except `big` (25 fp32, 100 B). Layer j forward: s_j = f(s_{j-1}), s_{-1} = x (input);
// backward j: h = a(s_j, g_{j+1}), big = b(h), g_j = c(big, s_{j-1}). s_j is saved for backward.
Graph sampled_chain(int built) {
  Graph g;
  g.layers_total = 4;
  g.layers_built = built;
  const double scale = 4.0 / built;
  const int x = tensor(g, "x", {10}, TensorRole::input);
  auto layer_op = [&](std::string name, int layer, Stage stage, std::vector<int> in, int out) {
    Op o;
    o.name = std::move(name);
    o.kind = OpKind::residual_add;
    o.layer = layer;
    o.stage = stage;
    o.count = scale;
    o.inputs = std::move(in);
    o.outputs = {out};
    g.add_op(o);
  };
  std::vector<int> s;
  for (int j = 0; j < built; ++j) {
    s.push_back(tensor(g, "s", {10}, TensorRole::activation, scale));
    layer_op("layer" + std::to_string(j) + ".f", j, Stage::forward, {j == 0 ? x : s[j - 1]}, s[j]);
  }
  int grad = -1;
  for (int j = built - 1; j >= 0; --j) {
    const std::string n = "layer" + std::to_string(j);
    const int h = tensor(g, "h", {10}, TensorRole::activation);
    const int big = tensor(g, "big", {25}, TensorRole::activation);
    const int gj = tensor(g, "g", {10}, TensorRole::activation);
    std::vector<int> a_in{s[j]};
    if (grad >= 0) a_in.push_back(grad);
    layer_op(n + ".a", j, Stage::backward, a_in, h);
    layer_op(n + ".b", j, Stage::backward, {h}, big);
    layer_op(n + ".c", j, Stage::backward, {big, j == 0 ? x : s[j - 1]}, gj);
    grad = gj;
  }
  return g;
}

}  // namespace

TEST_CASE("memory walk: a sampled layer's saved tensors stay for its group while it runs") {
  // All 4 layers built: the peak is at layer3.b, the first backward op that makes `big`:
  // x 40 + s0..s2 120 (s3 freed after layer3.a) + h 40 + big 100 = 300 B.
  const MemoryBreakdown full = predict_memory(sampled_chain(4), true);
  CHECK(full.peak == 300);
  CHECK(full.peak_at == "layer3.b");
  // Sampled, the walk follows one real layer of each group; the group's other saved instances
  // exist throughout its forward and backward, so the scaled peak is the full model's.
  // Built 2 (count 2): at layer1.b, x 40 + s0 2·40 + s1's other instance 40 + h 40 + big 100.
  const MemoryBreakdown two = predict_memory(sampled_chain(2), true);
  CHECK(two.peak == 300);
  CHECK(two.peak_at == "layer1.b");
  // Built 1 (count 4): x 40 + s0's three other instances 120 + h 40 + big 100.
  CHECK(predict_memory(sampled_chain(1), true).peak == 300);
  // As built (unscaled), built 2: x 40 + s0 40 + h 40 + big 100 = 220 (s1 freed after layer1.a).
  CHECK(predict_memory(sampled_chain(2), false).peak == 220);
}
