// Workload and model sizes beyond the bounds are refused with one line naming the field and the
// bound, before anything multiplies them; the largest allowed sizes are accepted.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "core/errors.hpp"
#include "core/config/model.hpp"
#include "core/config/workload.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::test_models;

namespace {

Workload decode(int64_t batch, int64_t prompt = 128, int64_t new_tokens = 128) {
  Workload w;
  w.phase = Phase::decode;
  w.batch = batch;
  w.prompt = prompt;
  w.new_tokens = new_tokens;
  return w;
}

Workload prefill(int64_t batch, int64_t prompt) {
  Workload w = decode(batch, prompt);
  w.phase = Phase::prefill;
  return w;
}

Workload train(int64_t batch, int64_t seq, int64_t grad_accum) {
  Workload w;
  w.phase = Phase::train;
  w.batch = batch;
  w.seq = seq;
  w.grad_accum = grad_accum;
  return w;
}

}  // namespace

TEST_CASE("sizes: a decode batch of 1e12 is refused naming the bound") {
  CHECK_THROWS_WITH_AS(validate(decode(1'000'000'000'000)),
                       "decode batch = 1e+12 is beyond 16,777,216 sequences; lower batch", ConfigError);
  CHECK_THROWS_WITH_AS(validate(decode(max_batch + 1)),
                       "decode batch = 16,777,217 is beyond 16,777,216 sequences; lower batch", ConfigError);
}

TEST_CASE("sizes: each workload field has its bound") {
  CHECK_THROWS_WITH_AS(validate(prefill(1, max_sequence + 1)),
                       doctest::Contains("prefill prompt = 16,777,217 is beyond 16,777,216 tokens"), ConfigError);
  CHECK_THROWS_WITH_AS(validate(decode(1, 1, max_sequence + 1)),
                       doctest::Contains("decode new_tokens = 16,777,217 is beyond"), ConfigError);
  CHECK_THROWS_WITH_AS(validate(decode(1, max_sequence, 1)),
                       doctest::Contains("decode prompt + new_tokens = 16,777,217 is beyond 16,777,216 tokens"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(validate(train(1, max_sequence + 1, 1)), doctest::Contains("train seq ="), ConfigError);
  CHECK_THROWS_WITH_AS(validate(train(1, 1, max_grad_accum + 1)),
                       doctest::Contains("train grad_accum = 1,048,577 is beyond 1,048,576 micro-batches"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(validate(train(1, 1, 9'000'000'000'000'000)),
                       doctest::Contains("train grad_accum = 9e+15 is beyond"), ConfigError);
}

TEST_CASE("sizes: tokens per step are bounded even when each field is allowed") {
  CHECK_THROWS_WITH_AS(
      validate(prefill(max_batch, 100'000)),
      "prefill batch·prompt = 1,677,721,600,000 tokens is beyond 1,099,511,627,776 tokens per step; "
      "lower one of them",
      ConfigError);
  CHECK_THROWS_WITH_AS(validate(decode(max_batch, max_sequence / 2, max_sequence / 2)),
                       doctest::Contains("decode batch·(prompt+new_tokens) = 281,474,976,710,656 tokens"), ConfigError);
  // Every field at its bound: the product is far past int64 yet the message is exact.
  CHECK_THROWS_WITH_AS(validate(train(max_batch, max_sequence, max_grad_accum)),
                       doctest::Contains("train batch·seq·grad_accum = 2.95148e+20 tokens"), ConfigError);
}

TEST_CASE("sizes: the largest allowed workloads are accepted") {
  CHECK_NOTHROW(validate(decode(max_batch, 32768, 32768)));          // 2^24 · 2^16 = 2^40
  CHECK_NOTHROW(validate(prefill(1, max_sequence)));
  CHECK_NOTHROW(validate(prefill(65536, max_sequence)));             // 2^40 tokens
  CHECK_NOTHROW(validate(decode(1, max_sequence - 1, 1)));
  CHECK_NOTHROW(validate(train(max_batch, 65536, 1)));
  CHECK_NOTHROW(validate(train(1, 1, max_grad_accum)));
  CHECK_NOTHROW(validate(train(64, 1 << 20, 1 << 14)));              // 2^6 · 2^20 · 2^14 = 2^40
  CHECK(train(64, 1 << 20, 1 << 14).tokens_per_step() == std::ldexp(1.0, 40));
  // Non-positive sizes keep their message.
  CHECK_THROWS_WITH_AS(validate(decode(0)), "decode: batch must be > 0 (got 0)", ConfigError);
}

TEST_CASE("sizes: a model with hidden = 2^40 is refused") {
  ModelConfig m = llama2_7b();
  m.hidden = int64_t{1} << 40;
  CHECK_THROWS_WITH_AS(validate(m),
                       "model 'llama-2-7b': hidden = 1,099,511,627,776 is beyond 1,048,576; lower hidden", ConfigError);
}

TEST_CASE("sizes: each model field has its bound") {
  auto refused = [](ModelConfig m, const char* text) {
    CHECK_THROWS_WITH_AS(validate(m), doctest::Contains(text), ConfigError);
  };
  ModelConfig m = llama2_7b();
  m.layers = max_layers + 1;
  refused(m, "layers = 65,537 is beyond 65,536");
  m = llama2_7b();
  m.ffn_hidden = max_ffn_hidden + 1;
  refused(m, "ffn_hidden = 4,194,305 is beyond 4,194,304");
  m = llama2_7b();
  m.vocab = max_vocab + 1;
  refused(m, "vocab = 16,777,217 is beyond 16,777,216");
  m = llama2_7b();
  m.max_seq = max_model_seq + 1;
  refused(m, "max_seq = 16,777,217 is beyond 16,777,216");
  m = mixtral_8x7b();
  m.experts = max_experts + 1;
  refused(m, "experts = 65,537 is beyond 65,536");
  m = mixtral_8x7b();
  m.expert_ffn_hidden = max_ffn_hidden + 1;
  refused(m, "expert_ffn_hidden = 4,194,305");
}

TEST_CASE("sizes: every field allowed but the parameter count past 2^50 is refused") {
  ModelConfig m = mixtral_8x7b();
  m.layers = max_layers;
  m.hidden = max_hidden;
  m.heads = 1024;
  m.kv_heads = 8;
  m.ffn_hidden = max_ffn_hidden;
  m.experts = max_experts;
  // 2^16 layers · 2^16 experts · 3 · 2^20 · 2^22 is about 2^75: int64 would wrap.
  CHECK_THROWS_WITH_AS(validate(m), doctest::Contains("parameters is beyond 1,125,899,906,842,624; lower layers"),
                       ConfigError);
}

TEST_CASE("sizes: the largest allowed model fields are accepted and count without overflow") {
  ModelConfig m = llama2_7b();
  m.hidden = max_hidden;
  m.heads = 8192;
  m.kv_heads = 8;
  m.ffn_hidden = max_ffn_hidden;
  m.vocab = max_vocab;
  m.max_seq = max_model_seq;
  m.layers = 64;
  CHECK_NOTHROW(validate(m));
  CHECK(m.params() > 0);
  CHECK(m.params() <= max_params);
  // Many layers of a small model.
  ModelConfig deep = tiny_llama();
  deep.layers = max_layers;
  CHECK_NOTHROW(validate(deep));
  // Many small experts.
  ModelConfig moe = tiny_moe();
  moe.experts = max_experts;
  CHECK_NOTHROW(validate(moe));
}

TEST_CASE("sizes: capacity_factor must be finite") {
  ModelConfig m = mixtral_8x7b();
  m.capacity_factor = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(validate(m), doctest::Contains("capacity_factor = nan must be a finite number"),
                       ConfigError);
  m.capacity_factor = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS(validate(m), doctest::Contains("capacity_factor = inf"), ConfigError);
  m.capacity_factor = 1e300;
  CHECK_THROWS_AS(validate(m), ConfigError);
  m.capacity_factor = -1;
  CHECK_THROWS_WITH_AS(validate(m), doctest::Contains("capacity_factor must be > 0"), ConfigError);
  m.capacity_factor = max_capacity_factor;
  CHECK_NOTHROW(validate(m));
  ModelConfig dense = llama2_7b();
  dense.capacity_factor = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(validate(dense), ConfigError);
}
