// The embedded catalogs: datasheet figures, aliases and case-insensitive lookup, the model
// zoo's dimensions (checked through hand-computed parameter counts), and lookup errors.
#include <doctest/doctest.h>

#include <algorithm>

#include "approx.hpp"
#include "core/text.hpp"
#include "test_dsl_support.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::test;

TEST_CASE("dsl: hardware catalog lists every entry with datasheet figures") {
  const std::vector<Hardware> all = hardware_catalog();
  std::vector<std::string> names;
  for (const Hardware& h : all) names.push_back(h.name);
  CHECK(names == std::vector<std::string>{"V100", "A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe",
                                          "H200", "B200", "L4", "host-cpu"});
  for (const Hardware& h : all) {
    CAPTURE(h.name);
    CHECK(h.memory_bytes > 0);
    CHECK(h.memory_bandwidth > 0);
    CHECK(h.peak(DType::fp32) > 0);
    CHECK_FALSE(h.calibrated);
    CHECK_FALSE(h.source.empty());
    if (h.kind != "gpu") continue;
    CHECK(starts_with(h.source, "https://"));
    CHECK(h.launch_eager == 4e-6);
    CHECK(h.launch_graph == 1e-6);
    CHECK(h.dispatch_eager == 4e-6);  // eager steps are paced by the host
    CHECK(h.launch_wait == 0.0);
    CHECK(h.infiniband.bandwidth == 50e9);
    // Every class a GPU runs has a documented default efficiency in (0, 1].
    for (const char* c : {"gemm", "attention", "norm", "pointwise", "embedding", "loss", "optimizer", "memory"}) {
      const OpClass cls = *parse_op_class(c);
      REQUIRE(h.compute_efficiency.count(cls) == 1);
      REQUIRE(h.memory_efficiency.count(cls) == 1);
      CHECK(h.compute_efficiency.at(cls) > 0);
      CHECK(h.compute_efficiency.at(cls) <= 1);
      CHECK(h.memory_efficiency.at(cls) > 0);
      CHECK(h.memory_efficiency.at(cls) <= 1);
    }
  }
}

TEST_CASE("dsl: hardware figures match the datasheets") {
  const Hardware h100 = find_hardware("H100-SXM");
  CHECK(h100.peak(DType::fp32) == 67e12);
  CHECK(h100.peak(DType::tf32) == approx(494.7e12));
  CHECK(h100.peak(DType::bf16) == approx(989.4e12));
  CHECK(h100.peak(DType::fp16) == approx(989.4e12));
  CHECK(h100.peak(DType::fp8) == approx(1978.9e12));
  CHECK(h100.peak(DType::int8) == approx(1978.9e12));
  CHECK(h100.memory_bytes == 80e9);
  CHECK(h100.memory_bandwidth == 3.35e12);
  CHECK(h100.l2_bytes == 50.0 * 1024 * 1024);
  CHECK(h100.sm_count == 132);
  CHECK(h100.nvlink.bandwidth == 450e9);
  CHECK(h100.pcie.bandwidth == 64e9);
  // bf16 ridge point: 989.4e12 / 3.35e12 = 295.3 FLOP/byte.
  CHECK(h100.ridge_point(DType::bf16) == approx(295.34).epsilon(1e-3));

  const Hardware v100 = find_hardware("V100");
  CHECK(v100.peak(DType::fp32) == approx(15.7e12));
  CHECK(v100.peak(DType::fp16) == 125e12);
  CHECK(v100.peak(DType::int8) == 62e12);
  CHECK_FALSE(v100.supports(DType::bf16));
  CHECK_FALSE(v100.supports(DType::tf32));
  CHECK_FALSE(v100.supports(DType::fp8));
  CHECK(v100.memory_bytes == 32e9);
  CHECK(v100.memory_bandwidth == 900e9);
  CHECK(v100.l2_bytes == 6.0 * 1024 * 1024);
  CHECK(v100.sm_count == 80);
  CHECK(v100.nvlink.bandwidth == 150e9);
  CHECK(v100.pcie.bandwidth == 16e9);

  const Hardware a40 = find_hardware("A100-40GB");
  CHECK(a40.memory_bytes == 40e9);
  CHECK(a40.memory_bandwidth == 1555e9);
  CHECK(a40.peak(DType::tf32) == 156e12);
  CHECK(a40.peak(DType::int8) == 624e12);
  CHECK_FALSE(a40.supports(DType::fp8));

  const Hardware h200 = find_hardware("H200");
  CHECK(h200.peak(DType::bf16) == h100.peak(DType::bf16));
  CHECK(h200.memory_bytes == 141e9);
  CHECK(h200.memory_bandwidth == 4.8e12);

  const Hardware b200 = find_hardware("B200");
  CHECK(b200.peak(DType::bf16) == 2.25e15);
  CHECK(b200.peak(DType::fp8) == 4.5e15);
  CHECK(b200.memory_bytes == 192e9);
  CHECK(b200.memory_bandwidth == 8e12);
  CHECK(b200.sm_count == 148);
  CHECK(b200.nvlink.bandwidth == 900e9);

  const Hardware pcie = find_hardware("H100-PCIe");
  CHECK(pcie.peak(DType::bf16) == 756e12);
  CHECK(pcie.sm_count == 114);
  CHECK(pcie.nvlink.bandwidth == 0);

  const Hardware l4 = find_hardware("L4");
  CHECK(l4.peak(DType::fp8) == approx(242.5e12));
  CHECK(l4.memory_bytes == 24e9);
  CHECK(l4.memory_bandwidth == 300e9);
  CHECK(l4.sm_count == 58);
  CHECK(l4.nvlink.bandwidth == 0);

  const Hardware host = find_hardware("host-cpu");
  CHECK(host.kind == "cpu");
}

TEST_CASE("dsl: hardware lookup ignores case and knows aliases") {
  CHECK(find_hardware("h100").name == "H100-SXM");
  CHECK(find_hardware("H100-sxm").name == "H100-SXM");
  CHECK(find_hardware("a100").name == "A100-80GB");
  CHECK(find_hardware("A100-40gb").name == "A100-40GB");
  CHECK(find_hardware("cpu").name == "host-cpu");
  try {
    (void)find_hardware("H100-SXN");
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    CHECK(starts_with(e.what(), "unknown hardware 'H100-SXN' (did you mean 'H100-SXM'?); known: V100, "));
  }
}

TEST_CASE("dsl: the model zoo has the published dimensions") {
  const std::vector<ModelConfig> zoo = model_zoo();
  CHECK(zoo.size() == 22);
  for (const ModelConfig& m : zoo) {
    CAPTURE(m.name);
    CHECK_NOTHROW(validate(m));
  }
  // Llama 3 8B: 8,030,261,248 parameters (32 layers x 218,112,000 + 2 x 128256 x 4096 + 4096).
  const ModelConfig l3 = find_model("llama-3-8b");
  CHECK(l3.params() == 8030261248);
  CHECK(l3.kv_heads == 8);
  CHECK(l3.max_seq == 8192);
  CHECK(l3.rope);
  CHECK_FALSE(l3.tied_embeddings);
  // GPT-2 small: 124,439,808 parameters (tied embeddings, learned positions, biases).
  const ModelConfig g2 = find_model("GPT2");
  CHECK(g2.params() == 124439808);
  CHECK(g2.max_seq == 1024);
  CHECK(g2.activation == Activation::gelu);
  CHECK(g2.bias);
  const ModelConfig l70 = find_model("llama-2-70b");
  CHECK(l70.layers == 80);
  CHECK(l70.heads == 64);
  CHECK(l70.kv_heads == 8);
  CHECK(l70.ffn_hidden == 28672);
  CHECK(l70.vocab == 32000);
  const ModelConfig l405 = find_model("llama-3.1-405b");  // alias
  CHECK(l405.name == "llama-3-405b");
  CHECK(l405.layers == 126);
  CHECK(l405.hidden == 16384);
  CHECK(l405.max_seq == 131072);
  // ResNets (kind = "cnn"): torchvision's parameter counts; an alias finds ResNet-50.
  const ModelConfig rn50 = find_model("rn50");
  REQUIRE(rn50.image_model());
  CHECK(rn50.name == "resnet-50");
  CHECK(rn50.params() == 25557032);
  CHECK(rn50.cnn->image == 224);
  CHECK(rn50.cnn->stages.size() == 4);
  CHECK(rn50.cnn->stages[2].blocks == 6);
  CHECK(find_model("resnet-18").params() == 11689512);
  CHECK(find_model("resnet-34").params() == 21797672);
  CHECK(find_model("resnet-152").params() == 60192808);
  CHECK_FALSE(find_model("resnet-18").cnn->bottleneck);
  const ModelConfig tiny = find_model("tiny-llama");
  CHECK(tiny.layers == 2);
  CHECK(tiny.hidden == 64);
  CHECK(tiny.heads == 4);
  CHECK(tiny.kv_heads == 2);
  CHECK(tiny.ffn_hidden == 128);
  CHECK(tiny.vocab == 256);
  CHECK(tiny.max_seq == 256);
  // Mixtral 8x7B (46.7B, 12.9B active): a layer is attention 41,943,040 + norms 8,192 + router
  // 4096·8 = 32,768 + 8 experts of 3·4096·14336 = 176,160,768; embedding and head 2·32000·4096.
  const ModelConfig mx = find_model("mixtral");
  CHECK(mx.experts == 8);
  CHECK(mx.top_k == 2);
  CHECK(mx.params() == 32 * (41943040LL + 8192 + 32768 + 8 * 176160768LL) + 262144000 + 4096);
  CHECK(mx.params() == 46702792704LL);
  CHECK(mx.active_params() == 12879925248LL);  // 2 of the 8 experts
  // Qwen1.5-MoE-A2.7B (14.3B, 2.7B active): 60 experts of 3·2048·1408 = 8,650,752, top 4, and
  // shared experts of 4 experts' width.
  const ModelConfig qw = find_model("qwen-moe");
  CHECK(qw.params() == 24 * (16777216LL + 4096 + 2048 * 60 + 64 * 8650752LL) + 2 * 151936LL * 2048 + 2048);
  CHECK(qw.params() == 14315587584LL);
  CHECK(qw.active_params() == 2688976896LL);
  const ModelConfig tg = find_model("tiny-gpt");
  CHECK(tg.ffn_hidden == 256);
  CHECK(tg.norm == NormKind::layernorm);
}

TEST_CASE("dsl: find_model errors suggest a name and list the zoo") {
  try {
    (void)find_model("lama-3-8b");
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    CHECK(starts_with(e.what(), "unknown model 'lama-3-8b' (did you mean 'llama-3-8b'?); known: gpt2, gpt2-medium"));
  }
  try {
    (void)find_model("qqqqqqqqqq");
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    CHECK(starts_with(e.what(), "unknown model 'qqqqqqqqqq'; known: gpt2,"));
  }
  // A module-path override replaces the zoo.
  CHECK(find_model("MINE", dsl_fixture("modpath")).name == "my-model");
  CHECK(model_zoo(dsl_fixture("modpath")).size() == 1);
}

TEST_CASE("dsl: Hopper reaches a smaller share of its peak; GPUs carry the engine's host work") {
  // stdlib/hardware.lua: the H100 calibration's class fit for Hopper (gemm 0.664, attention
  // 0.387, rounded), the guide's 0.75 and FlashAttention-2's 0.5 elsewhere.
  for (const char* hopper : {"H100-SXM", "H100-PCIe", "H200"}) {
    const Hardware hw = find_hardware(hopper);
    CHECK_MESSAGE(hw.compute_eff(OpClass::gemm) == 0.66, hopper);
    CHECK_MESSAGE(hw.compute_eff(OpClass::attention) == 0.39, hopper);
    CHECK_MESSAGE(hw.compute_eff(OpClass::norm) == 0.5, hopper);  // the other classes keep theirs
  }
  const Hardware a100 = find_hardware("A100-80GB");
  CHECK(a100.compute_eff(OpClass::gemm) == 0.75);
  CHECK(a100.compute_eff(OpClass::attention) == 0.5);
  // The H200 calibration's engine sweep (611 µs a step, 1.23 µs an op) on every GPU entry.
  CHECK(a100.engine_host_per_step == approx(611e-6));
  CHECK(a100.engine_host_per_op == approx(1.23e-6));
}
