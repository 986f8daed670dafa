// The ResNet family's counts against the published ones, the CNN builder's graphs (their
// FLOPs and parameters from the configuration, one gradient per parameter, counts on the
// repeated blocks), a tiny network's training step run on the CPU backend, and its price.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "backends/cpu/cpu_backend.hpp"
#include "core/builders/builders.hpp"
#include "core/builders/cnn.hpp"
#include "core/passes/passes.hpp"
#include "core/cost/cost_model.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;

namespace {

Workload images(Phase phase, int64_t batch) {
  Workload w;
  w.phase = phase;
  w.batch = batch;
  return w;
}

CnnConfig tiny() {
  CnnConfig m;
  m.name = "tiny-resnet";
  m.image = 16;
  m.stem_width = 8;
  m.stages = {{2, 4, 1}, {3, 8, 2}};
  m.classes = 10;
  return m;
}

double sum_flops(const Graph& g, OpKind kind) {
  double f = 0;
  for (const Op& op : g.ops)
    if (op.kind == kind) f += op_flops(op, g) * op.count;
  return f;
}

}  // namespace

TEST_CASE("resnet: parameters and multiply-adds of the published models") {
  // torchvision's resnet18/50/101 parameter counts; 1.81, 4.09 and 7.80 G multiply-adds at 224².
  CHECK(resnet(18).params() == 11689512);
  CHECK(resnet(50).params() == 25557032);
  CHECK(resnet(101).params() == 44549160);
  CHECK(resnet(18).forward_macs() == 1814073344);
  CHECK(resnet(50).forward_macs() == 4089184256);
  CHECK(resnet(101).forward_macs() == 7801405440);
  CHECK(resnet(50).features() == 2048);
  CHECK(resnet(152).blocks() == 50);
  CHECK_THROWS_AS((void)resnet(42), ConfigError);
  CnnConfig bad = resnet(50);
  bad.stages[1].width = 0;
  CHECK_THROWS_WITH_AS(validate(bad), doctest::Contains("stages[2].width"), ConfigError);
}

TEST_CASE("build_cnn: a ResNet-50 training step holds the model's FLOPs, parameters and gradients") {
  const CnnConfig m = resnet(50);
  const int64_t batch = 4;
  const Graph g = build_cnn(m, images(Phase::train, batch));
  CHECK(g.layers_total == 16);
  CHECK(g.layers_built == 8);  // each stage's first block and one standing for the rest
  // Forward convolutions: 2 FLOPs a multiply-add, the classifier apart; each gradient as much.
  const double conv_macs = double(m.forward_macs() - m.features() * m.classes);
  CHECK(sum_flops(g, OpKind::conv2d) == doctest::Approx(2.0 * batch * conv_macs));
  CHECK(sum_flops(g, OpKind::conv2d_wgrad) == doctest::Approx(2.0 * batch * conv_macs));
  // The stem's input needs no gradient: its data gradient is missing from the backward.
  const double stem = 112.0 * 112 * 7 * 7 * 3 * 64;
  CHECK(sum_flops(g, OpKind::conv2d_dgrad) == doctest::Approx(2.0 * batch * (conv_macs - stem)));
  // Every parameter (the classifier's bias is counted in params() only) has one gradient and
  // one AdamW update, counted over the repeated blocks.
  double weights = 0, grads = 0, updated = 0;
  for (const Tensor& t : g.tensors) {
    if (t.role == TensorRole::weight) weights += double(t.elements()) * t.count;
    if (t.role == TensorRole::gradient) grads += double(t.elements()) * t.count;
  }
  for (const Op& op : g.ops)
    if (op.kind == OpKind::adamw) updated += double(op.attrs.elements) * op.count;
  CHECK(weights == doctest::Approx(double(m.params() - m.classes)));
  CHECK(grads == doctest::Approx(weights));
  CHECK(updated == doctest::Approx(weights));
  // Stage 3's six blocks: its second built block stands for five.
  for (const Op& op : g.ops)
    if (op.name == "stage3.block1.conv2.conv") CHECK(op.count == 5);
}

TEST_CASE("build_cnn: inference runs the forward with running statistics; decode is refused") {
  const Graph g = build_cnn(resnet(18), images(Phase::prefill, 2));
  int bn_infer = 0;
  for (const Op& op : g.ops) {
    CHECK(op.stage == Stage::forward);
    CHECK(op.kind != OpKind::batchnorm);
    if (op.kind == OpKind::batchnorm_infer) ++bn_infer;
  }
  CHECK(bn_infer > 0);
  CHECK_THROWS_WITH_AS((void)build_cnn(resnet(18), images(Phase::decode, 2)), doctest::Contains("not decode"),
                       ConfigError);
}

TEST_CASE("build_cnn: a tiny network's training step runs on the CPU backend") {
  const Graph g = build_cnn(tiny(), images(Phase::train, 3));
  const int loss = g.find_tensor("cross_entropy.loss");
  const int stem_grad = g.find_tensor("stem.conv.weight.grad");
  const int repeated_grad = g.find_tensor("stage2.block1.conv1.conv.weight.grad");
  REQUIRE(loss >= 0);
  REQUIRE(stem_grad >= 0);
  REQUIRE(repeated_grad >= 0);
  const auto out = cpu::CpuBackend().evaluate(g, 7, {loss, stem_grad, repeated_grad});
  // Random weights: a cross-entropy near ln(10) per image, finite gradients everywhere.
  for (float l : out[0]) {
    CHECK(std::isfinite(l));
    CHECK(l > 0.5f);
    CHECK(l < 20.0f);
  }
  for (const auto& grad : {out[1], out[2]}) {
    double norm = 0;
    for (float v : grad) {
      CHECK(std::isfinite(v));
      norm += double(v) * v;
    }
    CHECK(norm > 0);
  }
}

TEST_CASE("build_cnn: a ResNet-50 training step is priced; the convolutions hold most of its time") {
  const Graph g = build_cnn(resnet(50), images(Phase::train, 32));
  const Prediction p = predict(g, test_models::h100_node());
  CHECK(p.step_time > 0);
  CHECK(p.time_by_class.at(OpClass::conv) > 0.5 * p.step_time);
  // 3 × the forward's 2·4.09 G FLOPs an image, less the stem's data gradient.
  CHECK(graph_flops(g) / 32 == doctest::Approx(3 * 2 * 4.09e9).epsilon(0.03));
}

TEST_CASE("fusion folds an inference conv's batch norm and ReLU into its epilogue") {
  ModelConfig m;
  m.name = "resnet-18";
  m.cnn = resnet(18);
  Workload w = images(Phase::prefill, 8);
  w.images = true;
  const std::vector<StackStep> stack = {StackStep{"+fusion", {PassSpec{"fusion", std::nullopt}}, ""}};
  const Graph plain = build_graph(m, w);
  const Graph fused = build_stack_graph(m, w, stack, 0);
  int norms = 0, relu_epilogues = 0, biased = 0, relus = 0;
  for (const Op& op : fused.ops) {
    norms += op.kind == OpKind::batchnorm_infer ? 1 : 0;
    relus += op.kind == OpKind::relu ? 1 : 0;
    if (op.kind != OpKind::conv2d) continue;
    biased += op.inputs.size() == 3 ? 1 : 0;
    relu_epilogues += op.attrs.conv_relu ? 1 : 0;
  }
  CHECK(norms == 0);  // every conv's norm folded
  // The convs whose norm a ReLU follows: the stem and each block's first (basic blocks: one of
  // two); the ReLU after each block's addition stays an op.
  CHECK(relu_epilogues == 1 + 8);
  CHECK(biased == 1 + 8 * 2 + 3);  // and the three projecting shortcuts
  CHECK(relus == 8);
  // The model's work is the same, its bytes fewer: two element-wise passes a conv gone.
  CHECK(graph_flops(fused) < graph_flops(plain));
  const Hardware hw = test_models::h100_node();
  CHECK(predict(fused, hw).step_time < 0.9 * predict(plain, hw).step_time);
  // Training graphs keep their norms (batch statistics cannot be folded).
  Workload t = images(Phase::train, 8);
  t.images = true;
  const Graph train = build_stack_graph(m, t, stack, 0);
  int train_norms = 0;
  for (const Op& op : train.ops) train_norms += op.kind == OpKind::batchnorm ? 1 : 0;
  CHECK(train_norms > 0);
}
