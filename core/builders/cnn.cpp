// build_cnn (cnn.hpp): a ResNet-style classifier's training step or inference batch.
//
// Forward per block (bottleneck): conv 1×1 → BN → ReLU → conv 3×3 (the stage's stride) → BN →
// ReLU → conv 1×1 → BN, plus the shortcut (a strided 1×1 conv and BN when it projects, else the
// block's input), added, then ReLU. Basic blocks have two 3×3 convolutions. Backward walks the
// same ops in reverse: each ReLU's gradient from its output, each BN's from its saved batch
// statistics, each convolution's data and weight gradients; the two branches' input gradients
// are summed. Each distinct block is one "layer" of the graph (Op::layer): a stage's first
// block, and its second standing for the blocks − 1 alike after it (counts on its ops, weights,
// gradients, optimizer states and the activations its backward keeps), as layer sampling does
// for transformers (core/cost/memory_model.cpp holds the other instances alike).
#include "core/builders/cnn.hpp"

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "core/errors.hpp"

namespace perfsim {

namespace {

// A feature map: a tensor [batch, side, side, channels].
struct Map {
  int id = -1;
  int64_t side = 0, channels = 0;
};

struct Param {
  int weight = -1;
  int layer = -1;
};

// What a pool's backward reads: its input and its window.
struct Pool {
  Map in;
  OpAttrs attrs;
};

// A residual block: its units (conv → BN (→ ReLU)) from first_unit, main_units of them on the
// main branch, then the shortcut's when it projects.
struct Block {
  std::string name;
  Map in, out;
  std::size_t first_unit, main_units;
  bool projects;
  int layer;
};

class CnnBuilder {
 public:
  CnnBuilder(const CnnConfig& m, const Workload& w) : m_m(m), m_w(w), m_train(w.phase == Phase::train) {
    m_g.model = m.name;
    m_g.workload = w;
  }

  Graph build() {
    const Map image{tensor("images", {batch(), m_m.image, m_m.image, m_m.in_channels}, TensorRole::input), m_m.image,
                    m_m.in_channels};
    const int labels = m_train ? tensor("labels", {batch()}, TensorRole::input, DType::int32) : -1;
    // Stem: its own layer (-1 keeps it out of the sampled blocks).
    m_layer = -1;
    Map x = conv_bn("stem", image, m_m.stem_width, 7, 2, 3, true);
    x = pool(OpKind::maxpool, "stem.pool", x, 3, 2, 1);
    // Stages: the first block, then one standing for the rest.
    int built = 0;
    for (std::size_t s = 0; s < m_m.stages.size(); ++s) {
      const CnnStage& st = m_m.stages[s];
      for (int64_t b = 0; b < std::min<int64_t>(st.blocks, 2); ++b) {
        m_layer = built++;
        m_repeats[m_layer] = b == 0 ? 1.0 : static_cast<double>(st.blocks - 1);
        x = block(fmt::format("stage{}.block{}", s + 1, b), x, s, b == 0 ? st.stride : 1);
      }
    }
    m_layer = -1;
    m_g.layers_built = built;
    m_g.layers_total = m_m.blocks();
    const int logits = head(x);
    if (m_train) {
      backward(logits, labels);
      optimizer();
    }
    apply_counts();
    m_g.check();
    return std::move(m_g);
  }

 private:
  [[nodiscard]] int64_t batch() const { return m_w.batch; }

  int tensor(const std::string& name, std::vector<int64_t> shape, TensorRole role, DType dtype = DType::fp32) {
    Tensor t;
    t.name = name;
    t.shape = std::move(shape);
    t.role = role;
    t.dtype = dtype;
    const int id = m_g.add_tensor(std::move(t));
    m_tensor_layer[id] = m_layer;
    return id;
  }
  int param(const std::string& name, std::vector<int64_t> shape) {
    const int id = tensor(name, std::move(shape), TensorRole::weight);
    m_params.push_back({id, m_layer});
    return id;
  }
  int buffer(const std::string& name, int64_t channels) {  // running statistics: persistent, not trained
    return tensor(name, {channels}, TensorRole::weight, DType::fp32);
  }
  void op(OpKind kind, const std::string& name, std::vector<int> in, std::vector<int> out, const OpAttrs& a,
          Stage stage) {
    Op o;
    o.kind = kind;
    o.name = name;
    o.inputs = std::move(in);
    o.outputs = std::move(out);
    o.attrs = a;
    o.stage = stage;
    o.layer = m_layer;
    m_g.add_op(std::move(o));
  }

  static OpAttrs conv_attrs(int64_t batch, const Map& x, int64_t filters, int64_t kernel, int64_t stride,
                            int64_t pad) {
    OpAttrs a;
    a.batch = batch;
    a.conv = ConvGeometry{x.side, x.side, x.channels, filters, kernel, kernel, stride, pad, 1, 1};
    return a;
  }
  static OpAttrs rows_attrs(int64_t rows, int64_t cols) {
    OpAttrs a;
    a.rows = rows, a.cols = cols;
    return a;
  }
  static OpAttrs elements_attrs(int64_t n) {
    OpAttrs a;
    a.elements = n;
    return a;
  }
  [[nodiscard]] std::vector<int64_t> map_shape(int64_t side, int64_t channels) const {
    return {batch(), side, side, channels};
  }

  // What the backward needs of a conv → BN (→ ReLU) unit.
  struct Unit {
    std::string name;
    Map in, conv_out, out;
    int w = -1, gamma = -1, beta = -1, mean = -1, rstd = -1, bn_out = -1;
    bool relu = false;
    OpAttrs conv;
    int layer = -1;
  };

  Map conv_bn(const std::string& name, const Map& x, int64_t filters, int64_t kernel, int64_t stride, int64_t pad,
              bool relu) {
    Unit u;
    u.name = name;
    u.in = x;
    u.relu = relu;
    u.layer = m_layer;
    u.conv = conv_attrs(batch(), x, filters, kernel, stride, pad);
    const int64_t side = u.conv.conv.out_h();
    u.w = param(name + ".conv.weight", {filters, kernel, kernel, x.channels});
    u.conv_out = {tensor(name + ".conv", map_shape(side, filters), TensorRole::activation), side, filters};
    op(OpKind::conv2d, name + ".conv", {x.id, u.w}, {u.conv_out.id}, u.conv, Stage::forward);
    u.gamma = param(name + ".bn.weight", {filters});
    u.beta = param(name + ".bn.bias", {filters});
    u.bn_out = tensor(name + ".bn", map_shape(side, filters), TensorRole::activation);
    const OpAttrs rows = rows_attrs(batch() * side * side, filters);
    if (m_train) {
      u.mean = tensor(name + ".bn.mean", {filters}, TensorRole::activation);
      u.rstd = tensor(name + ".bn.rstd", {filters}, TensorRole::activation);
      op(OpKind::batchnorm, name + ".bn", {u.conv_out.id, u.gamma, u.beta}, {u.bn_out, u.mean, u.rstd}, rows,
         Stage::forward);
    } else {
      const int mean = buffer(name + ".bn.running_mean", filters), var = buffer(name + ".bn.running_var", filters);
      op(OpKind::batchnorm_infer, name + ".bn", {u.conv_out.id, u.gamma, u.beta, mean, var}, {u.bn_out}, rows,
         Stage::forward);
    }
    u.out = {u.bn_out, side, filters};
    if (relu) {
      u.out.id = tensor(name + ".relu", map_shape(side, filters), TensorRole::activation);
      op(OpKind::relu, name + ".relu", {u.bn_out}, {u.out.id}, elements_attrs(batch() * side * side * filters),
         Stage::forward);
    }
    m_units.push_back(u);
    return u.out;
  }

  Map pool(OpKind kind, const std::string& name, const Map& x, int64_t kernel, int64_t stride, int64_t pad) {
    OpAttrs a = conv_attrs(batch(), x, x.channels, kernel, stride, pad);
    const int64_t side = a.conv.out_h();
    const Map y{tensor(name, map_shape(side, x.channels), TensorRole::activation), side, x.channels};
    op(kind, name, {x.id}, {y.id}, a, Stage::forward);
    m_pools.push_back({x, a});
    return y;
  }

  Map block(const std::string& name, const Map& x, std::size_t s, int64_t stride) {
    const int64_t w = m_m.stages[s].width, out = m_m.stage_channels(s);
    const std::size_t first_unit = m_units.size();
    Map y;
    if (m_m.bottleneck) {
      y = conv_bn(name + ".conv1", x, w, 1, 1, 0, true);
      y = conv_bn(name + ".conv2", y, w, 3, stride, 1, true);
      y = conv_bn(name + ".conv3", y, out, 1, 1, 0, false);
    } else {
      y = conv_bn(name + ".conv1", x, w, 3, stride, 1, true);
      y = conv_bn(name + ".conv2", y, w, 3, 1, 1, false);
    }
    const std::size_t main_units = m_units.size() - first_unit;
    Map shortcut = x;
    const bool projects = stride != 1 || x.channels != out;
    if (projects) shortcut = conv_bn(name + ".downsample", x, out, 1, stride, 0, false);
    const Map sum{tensor(name + ".add", map_shape(y.side, out), TensorRole::activation), y.side, out};
    op(OpKind::residual_add, name + ".add", {y.id, shortcut.id}, {sum.id}, elements_attrs(batch() * y.side * y.side * out),
       Stage::forward);
    const Map relu{tensor(name + ".relu", map_shape(y.side, out), TensorRole::activation), y.side, out};
    op(OpKind::relu, name + ".relu", {sum.id}, {relu.id}, elements_attrs(batch() * y.side * y.side * out),
       Stage::forward);
    m_blocks.push_back({name, x, relu, first_unit, main_units, projects, m_layer});
    return relu;
  }

  // Global average pooling, then the classifier [features, classes] (its bias is counted in
  // the parameters only, as the transformer builders count linear biases).
  int head(const Map& x) {
    m_layer = -1;
    m_features = pool(OpKind::avgpool, "avgpool", x, x.side, 1, 0);
    m_fc = param("fc.weight", {m_features.channels, m_m.classes});
    const int logits = tensor("fc", {batch(), m_m.classes}, TensorRole::activation);
    OpAttrs a;
    a.m = batch(), a.n = m_m.classes, a.k = m_features.channels;
    op(OpKind::gemm, "fc", {m_features.id, m_fc}, {logits}, a, Stage::forward);
    return logits;
  }

  // ---- backward ------------------------------------------------------------------------
  int grad(int weight, const std::string& name, int layer) {
    const int saved = m_layer;
    m_layer = layer;
    const int g = tensor(name + ".grad", m_g.tensor(weight).shape, TensorRole::gradient);
    m_layer = saved;
    m_grads[weight] = g;
    return g;
  }
  int act_grad(const std::string& name, const Map& like) {
    return tensor(name, map_shape(like.side, like.channels), TensorRole::activation);
  }

  void backward(int logits, int labels) {
    const int loss = tensor("cross_entropy.loss", {batch()}, TensorRole::activation);
    const int dlogits = tensor("cross_entropy.dlogits", {batch(), m_m.classes}, TensorRole::activation);
    OpAttrs ce = rows_attrs(batch(), m_m.classes);
    op(OpKind::cross_entropy, "cross_entropy", {logits, labels}, {loss, dlogits}, ce, Stage::forward);
    // fc: dfeatures = dlogits · Wᵀ, dW = featuresᵀ · dlogits.
    const int dfeat = tensor("fc.dgrad", {batch(), 1, 1, m_features.channels}, TensorRole::activation);
    OpAttrs dg;
    dg.m = batch(), dg.n = m_features.channels, dg.k = m_m.classes, dg.trans_b = true;
    op(OpKind::gemm, "fc.dgrad", {dlogits, m_fc}, {dfeat}, dg, Stage::backward);
    OpAttrs wg;
    wg.m = m_features.channels, wg.n = m_m.classes, wg.k = batch(), wg.trans_a = true;
    op(OpKind::gemm, "fc.wgrad", {m_features.id, dlogits}, {grad(m_fc, "fc.weight", -1)}, wg, Stage::backward);
    const Pool& avg = m_pools.back();
    int dx = act_grad("avgpool.bwd", avg.in);
    op(OpKind::avgpool_bwd, "avgpool.bwd", {dfeat}, {dx}, avg.attrs, Stage::backward);
    for (auto b = m_blocks.rbegin(); b != m_blocks.rend(); ++b) dx = block_backward(*b, dx);
    // The stem: max pool, then its conv unit; the images need no gradient.
    const Pool& stem_pool = m_pools.front();
    m_layer = -1;
    const int dpool = act_grad("stem.pool.bwd", stem_pool.in);
    op(OpKind::maxpool_bwd, "stem.pool.bwd", {stem_pool.in.id, dx}, {dpool}, stem_pool.attrs, Stage::backward);
    unit_backward(m_units.front(), dpool, false);
  }

  // Returns the gradient of the block's input.
  int block_backward(const Block& b, int dout);

  // Returns the gradient of the unit's input (-1 when `input_grad` is false).
  int unit_backward(const Unit& u, int dout, bool input_grad) {
    m_layer = u.layer;
    const int64_t side = u.conv_out.side, c = u.conv_out.channels;
    int dbn = dout;
    if (u.relu) {
      dbn = act_grad(u.name + ".relu.bwd", u.conv_out);
      op(OpKind::relu_bwd, u.name + ".relu.bwd", {u.out.id, dout}, {dbn}, elements_attrs(batch() * side * side * c),
         Stage::backward);
    }
    const int dconv = act_grad(u.name + ".bn.bwd", u.conv_out);
    op(OpKind::batchnorm_bwd, u.name + ".bn.bwd", {u.conv_out.id, u.gamma, u.mean, u.rstd, dbn},
       {dconv, grad(u.gamma, u.name + ".bn.weight", u.layer), grad(u.beta, u.name + ".bn.bias", u.layer)},
       rows_attrs(batch() * side * side, c), Stage::backward);
    op(OpKind::conv2d_wgrad, u.name + ".conv.wgrad", {u.in.id, dconv}, {grad(u.w, u.name + ".conv.weight", u.layer)},
       u.conv, Stage::backward);
    if (!input_grad) return -1;
    const int dx = act_grad(u.name + ".conv.dgrad", u.in);
    op(OpKind::conv2d_dgrad, u.name + ".conv.dgrad", {dconv, u.w}, {dx}, u.conv, Stage::backward);
    return dx;
  }

  // ---- optimizer and counts ----------------------------------------------------------------
  // Unfused AdamW, one op per parameter tensor, as the transformer baseline.
  void optimizer() {
    for (const Param& p : m_params) {
      m_layer = p.layer;
      const Tensor w = m_g.tensor(p.weight);
      const int m = tensor(w.name + ".exp_avg", w.shape, TensorRole::optimizer_state);
      const int v = tensor(w.name + ".exp_avg_sq", w.shape, TensorRole::optimizer_state);
      OpAttrs a = elements_attrs(w.elements());
      a.passes = 4;
      op(OpKind::adamw, w.name + ".adamw", {p.weight, m_grads.at(p.weight), m, v}, {p.weight, m, v}, a,
         Stage::optimizer);
    }
    m_layer = -1;
  }

  // A repeated block's ops, persistent tensors and the activations its backward reads stand for
  // its repeats.
  void apply_counts() {
    std::vector<bool> read_in_backward(m_g.tensors.size(), false);
    for (const Op& o : m_g.ops)
      if (o.stage == Stage::backward)
        for (int id : o.inputs) read_in_backward[static_cast<std::size_t>(id)] = true;
    for (Op& o : m_g.ops) o.count = repeats(o.layer);
    for (Tensor& t : m_g.tensors) {
      const double r = repeats(m_tensor_layer[t.id]);
      if (t.role != TensorRole::activation || read_in_backward[static_cast<std::size_t>(t.id)]) t.count = r;
    }
  }
  [[nodiscard]] double repeats(int layer) const {
    const auto it = m_repeats.find(layer);
    return it == m_repeats.end() ? 1.0 : it->second;
  }

  const CnnConfig& m_m;
  const Workload& m_w;
  bool m_train;
  Graph m_g;
  int m_layer = -1;
  std::map<int, double> m_repeats;
  std::map<int, int> m_tensor_layer;
  std::vector<Param> m_params;
  std::map<int, int> m_grads;  // weight -> gradient
  std::vector<Unit> m_units;
  std::vector<Pool> m_pools;
  std::vector<Block> m_blocks;
  Map m_features;
  int m_fc = -1;
};

int CnnBuilder::block_backward(const Block& b, int dout) {
  m_layer = b.layer;
  const Map& out = b.out;
  const int dsum = act_grad(b.name + ".relu.bwd", out);
  op(OpKind::relu_bwd, b.name + ".relu.bwd", {out.id, dout}, {dsum}, elements_attrs(batch() * out.side * out.side * out.channels),
     Stage::backward);
  // Main branch, last unit first.
  int d = dsum;
  for (std::size_t i = b.main_units; i-- > 0;) d = unit_backward(m_units[b.first_unit + i], d, true);
  m_layer = b.layer;
  const int dshort = b.projects ? unit_backward(m_units[b.first_unit + b.main_units], dsum, true) : dsum;
  m_layer = b.layer;
  const int dx = act_grad(b.name + ".bwd", b.in);
  op(OpKind::residual_add, b.name + ".grad_sum", {d, dshort}, {dx},
     elements_attrs(batch() * b.in.side * b.in.side * b.in.channels), Stage::backward);
  return dx;
}

}  // namespace

Graph build_cnn(const CnnConfig& m, const Workload& w) {
  validate(m);
  if (w.phase == Phase::decode)
    throw ConfigError(fmt::format("model '{}' is an image classifier: use train{{}} or prefill{{}} (inference), "
                                  "not decode{{}}",
                                  m.name));
  if (w.grad_accum > 1)
    throw ConfigError(fmt::format("model '{}': grad_accum {} is not supported for image models yet", m.name,
                                  w.grad_accum));
  if (w.batch <= 0 || w.batch > max_batch)
    throw ConfigError(fmt::format("model '{}': batch must be in 1..{} (got {})", m.name, max_batch, w.batch));
  return CnnBuilder(m, w).build();
}

}  // namespace perfsim
