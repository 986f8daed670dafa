// Closed-form formulas and parameter counts, checked against hand-computed numbers.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "core/cost/formulas.hpp"
#include "core/errors.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::test_models;

TEST_CASE("formulas: KV cache bytes of Llama-2-7B") {
  // 2 (K, V) · 32 layers · 2048 tokens · 4096 (32 heads × 128) · 2 bytes.
  CHECK(formulas::kv_cache_bytes(llama2_7b(), 1, 2048, DType::bf16) == 1073741824.0);
  CHECK(formulas::kv_cache_bytes(llama2_7b(), 4, 2048, DType::fp32) == 4.0 * 2 * 1073741824.0);
  // GQA: Llama-3-8B caches 8 of 32 heads, a quarter of Llama-2-7B at the same length.
  CHECK(formulas::kv_cache_bytes(llama3_8b(), 1, 2048, DType::bf16) == 268435456.0);
}

TEST_CASE("formulas: static training bytes per parameter") {
  CHECK(formulas::train_static_bytes_per_param(DType::bf16, true) == 16);  // 2+2+4+4+4
  CHECK(formulas::train_static_bytes_per_param(DType::fp32, false) == 16); // 4+4+4+4
  CHECK(formulas::train_static_bytes_per_param(DType::bf16, false) == 12); // no master copy
}

TEST_CASE("formulas: ring all-reduce and ridge point") {
  CHECK(formulas::ring_allreduce_bytes(1e9, 4) == approx(1.5e9));  // 2·3/4
  CHECK(formulas::ring_allreduce_bytes(1e9, 2) == approx(1e9));    // 2·1/2
  CHECK(formulas::ring_allreduce_bytes(1e9, 1) == 0);
  CHECK_THROWS_AS((void)formulas::ring_allreduce_bytes(1e9, 0), ConfigError);
  CHECK(formulas::ridge_point(312e12, 2e12) == approx(156));  // A100 bf16, round figures
  CHECK(formulas::ridge_point(312e12, 1.555e12) == approx(200.6).epsilon(1e-3));
  CHECK_THROWS_AS((void)formulas::ridge_point(312e12, 0), ConfigError);
}

TEST_CASE("formulas: Megatron training FLOPs on hand-sized numbers") {
  ModelConfig m;
  m.layers = 1, m.hidden = 2, m.vocab = 24;
  // 72·B·s·l·h² = 72·1·12·1·4 = 3456; (1 + 12/12 + 24/24) = 3 -> 10368.
  CHECK(formulas::megatron_train_flops(m, 1, 12, false) == approx(10368));
  // 96·48 = 4608; (1 + 1 + 24/32) = 2.75 -> 12672.
  CHECK(formulas::megatron_train_flops(m, 1, 12, true) == approx(12672));
}

TEST_CASE("formulas: Megatron's full-recompute FLOPs per iteration of GPT-3 175B") {
  // Narayanan et al. 2021, §5.1, eq. 3, on GPT-3 175B at the paper's batch: B = 1536, s = 2048,
  // l = 96, h = 12288, V = 51200.
  //   96·B·s·l·h² = 96 · 1536 · 2048 · 96 · 12288² = 4,377,498,837,804,122,112
  //   s/(6h) = 2048/73728 = 1/36;  V/(16·l·h) = 51200/18,874,368 = 25/9216
  //   1 + 1/36 + 25/9216 = (9216 + 256 + 25)/9216 = 9497/9216
  //   F = 4,377,498,837,804,122,112 · 9497/9216 = 4,510,970,753,323,106,304 ≈ 4.51e18
  ModelConfig m = gpt("gpt-3-175b", 96, 12288, 96, 51200, 2048);
  CHECK(formulas::megatron_train_flops(m, 1536, 2048, true) == approx(4510970753323106304.0).epsilon(1e-12));
  // Without recompute, 72·B·s·l·h²·(1 + 1/36 + 51200/(12·96·12288)): 3/4 of the base, and the
  // vocabulary term 4/3 as large: 3,283,124,128,353,091,584 · (9216 + 256 + 100/3)/9216.
  CHECK(formulas::megatron_train_flops(m, 1536, 2048, false) == approx(3.386196746387325e18).epsilon(1e-12));
}

TEST_CASE("formulas: decode FLOPs per token of Llama-2-7B") {
  // Layer: 4·4096² + 3·4096·11008 + 2·4096 = 202,383,360; ×32 = 6,476,267,520;
  // + lm_head 32000·4096 + final norm 4096 = 6,607,343,616 matmul parameters.
  const double base = 2.0 * 6607343616.0;
  CHECK(formulas::decode_flops_per_token(llama2_7b(), 0) == approx(base));
  // Attention: 4 · 32 layers · 1000 context · 4096.
  CHECK(formulas::decode_flops_per_token(llama2_7b(), 1000) == approx(base + 524288000.0));
}

TEST_CASE("model parameter counts match published sizes") {
  CHECK(static_cast<double>(llama2_7b().params()) == approx(6.74e9).epsilon(0.01));
  CHECK(static_cast<double>(llama3_8b().params()) == approx(8.03e9).epsilon(0.01));
  // GPT-2 small with biases and tied embeddings: the well-known 124,439,808.
  CHECK(gpt2_small().params() == 124439808);
  // Exact for Llama-2-7B: 32 layers of 202,383,360 + 2 × 32000·4096 + 4096.
  CHECK(llama2_7b().params() == 6738415616);
}

TEST_CASE("formulas: ZeRO model states per GPU, the paper's 7.5B example at N_d = 64") {
  // Rajbhandari et al. 2020, Figure 1: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB (GB = 1e9 bytes).
  const double psi = 7.5e9;
  CHECK(formulas::zero_model_state_bytes(psi, 64, 0) == approx(120e9));
  CHECK(formulas::zero_model_state_bytes(psi, 64, 1) == approx(31.40625e9));   // 30 + 1.40625
  CHECK(formulas::zero_model_state_bytes(psi, 64, 2) == approx(16.640625e9));  // 15 + 1.640625
  CHECK(formulas::zero_model_state_bytes(psi, 64, 3) == approx(1.875e9));
  CHECK(formulas::zero_model_state_bytes(psi, 1, 3) == approx(120e9));  // one rank shards nothing
  CHECK_THROWS_AS((void)formulas::zero_model_state_bytes(psi, 64, 4), ConfigError);
  CHECK_THROWS_AS((void)formulas::zero_model_state_bytes(psi, 0, 1), ConfigError);
}

TEST_CASE("formulas: ring all-gather and reduce-scatter volumes") {
  CHECK(formulas::ring_allgather_bytes(1e9, 4) == approx(0.75e9));  // (4−1)/4
  CHECK(formulas::ring_allgather_bytes(1e9, 8) == approx(0.875e9));
  CHECK(formulas::ring_allgather_bytes(1e9, 1) == 0);
  // An all-reduce is a reduce-scatter then an all-gather: twice the volume.
  CHECK(formulas::ring_allreduce_bytes(1e9, 8) == approx(2 * formulas::ring_allgather_bytes(1e9, 8)));
  CHECK_THROWS_AS((void)formulas::ring_allgather_bytes(1e9, 0), ConfigError);
}

TEST_CASE("formulas: tensor-parallel bytes per layer and pass") {
  // b = 1, s = 2048, h = 12288 (GPT-3 175B), bf16: the buffer is 2048·12288·2 = 50,331,648
  // bytes; two ring all-reduces over 8 ranks send 2 · 2·7/8 of it = 176,160,768 bytes.
  CHECK(formulas::tp_layer_bytes_per_pass(1, 2048, 12288, 8, 2) == approx(176160768.0));
  CHECK(formulas::tp_layer_bytes_per_pass(1, 2048, 12288, 1, 2) == 0);
}

TEST_CASE("formulas: Megatron activation memory per layer (Korthikanti et al. 2022, Table 2)") {
  // GPT-3 175B: s = 2048, h = 12288, a = 96, t = 8, b = 1. 5·a·s/h = 5·96·2048/12288 = 80;
  // s·b·h = 25,165,824.
  using formulas::ActivationRecompute;
  const double sbh = 2048.0 * 12288.0;
  auto bytes = [](int tp, bool sp, ActivationRecompute r) {
    return formulas::megatron_layer_activation_bytes(2048, 1, 12288, 96, tp, sp, r);
  };
  CHECK(bytes(1, false, ActivationRecompute::none) == approx(sbh * 114));        // 34 + 80
  CHECK(bytes(8, false, ActivationRecompute::none) == approx(sbh * 23));         // 10 + 3 + 10
  CHECK(bytes(8, true, ActivationRecompute::none) == approx(sbh * 14.25));       // 114 / 8
  CHECK(bytes(8, false, ActivationRecompute::selective) == approx(sbh * 13));    // 10 + 3
  CHECK(bytes(8, true, ActivationRecompute::selective) == approx(sbh * 4.25));   // 34 / 8
  CHECK(bytes(8, true, ActivationRecompute::full) == approx(sbh * 2));
  // Without tensor parallelism sequence parallelism changes nothing.
  CHECK(bytes(1, true, ActivationRecompute::none) == approx(bytes(1, false, ActivationRecompute::none)));
}

TEST_CASE("formulas: pipeline bubble, 1F1B and interleaved") {
  // Narayanan et al. 2021, §2.2: p = 4 stages, m = 8 micro-batches: 3 of 11 slots idle.
  CHECK(formulas::pipeline_bubble_fraction(4, 8) == approx(3.0 / 11.0));
  CHECK(formulas::pipeline_bubble_fraction(1, 8) == 0);
  CHECK(formulas::pipeline_bubble_fraction(8, 1) == approx(7.0 / 8.0));
  // Interleaved, v = 2 chunks: bubble over ideal time (p−1)/(v·m) = 3/16, half of 1F1B's 3/8.
  CHECK(formulas::interleaved_bubble_ratio(4, 8, 2) == approx(3.0 / 16.0));
  CHECK(formulas::interleaved_bubble_ratio(4, 8, 1) == approx(3.0 / 8.0));
  CHECK_THROWS_AS((void)formulas::pipeline_bubble_fraction(0, 8), ConfigError);
  CHECK_THROWS_AS((void)formulas::interleaved_bubble_ratio(4, 8, 0), ConfigError);
}
