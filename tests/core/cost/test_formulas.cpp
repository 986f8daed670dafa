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
