// Speculative decoding in the serving engine (n-gram drafts, continuous batching): Leviathan et
// al.'s expected tokens a step, one request worked step by step, the accepted lengths a long run
// draws against the closed form, and where speculation stops paying as the load rises.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/config/model.hpp"
#include "core/serve/engine.hpp"
#include "core/errors.hpp"
#include "core/serve/metrics.hpp"
#include "core/serve/scheduler_config.hpp"
#include "core/serve/step_price.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"
#include "serve_test_util.hpp"

using namespace perfsim;
using test::FixedClock;
using test::request;

namespace {

SchedulerConfig speculative(int64_t k, double alpha) {
  SchedulerConfig c;
  c.kind = SchedulerKind::continuous;
  c.paged = true;
  c.block = 4;
  c.watermark = 0;
  c.speculative = k;
  c.acceptance = alpha;
  return c;
}

}  // namespace

TEST_CASE("speculative decoding: Leviathan et al.'s expected tokens a step") {
  // (1 − 0.7⁵) / 0.3 = 0.83193 / 0.3.
  CHECK(speculative_tokens_per_step(0.7, 4) == doctest::Approx(2.773100).epsilon(1e-6));
  CHECK(speculative_tokens_per_step(0.5, 1) == doctest::Approx(1.5));
  CHECK(speculative_tokens_per_step(1.0, 3) == 4.0);  // every draft accepted
}

TEST_CASE("speculative decoding: one request with every draft accepted, step by step") {
  // Prompt 8, 10 tokens, k = 3, α = 1: the prefill yields token 1; two verify passes of 4 rows
  // (the last token and 3 drafts) yield 4 tokens each (9); the last token needs no draft: a
  // plain decode. 4 steps, 2 verifies, 6 drafts accepted; the cache ends with 8 + 1 + 3 + 1 + 3
  // + 1 = 17 rows.
  FixedClock clock;
  const EngineRun run = run_engine({request(0, 0, 8, 10)}, speculative(3, 1.0), KvPool{64, 4, 1.0}, 64, 0, clock);
  REQUIRE(clock.steps.size() == 4);
  CHECK(clock.steps[0].seqs[0].tokens == 8);
  for (int i : {1, 2}) {
    CHECK(clock.steps[static_cast<std::size_t>(i)].seqs[0].tokens == 4);
    CHECK(clock.steps[static_cast<std::size_t>(i)].seqs[0].proposed == 3);
    CHECK(clock.steps[static_cast<std::size_t>(i)].sampled() == 4);  // logits for every verified row
  }
  CHECK(clock.steps[1].seqs[0].position == 8);
  CHECK(clock.steps[2].seqs[0].position == 12);
  CHECK(clock.steps[3].seqs[0].tokens == 1);
  CHECK(clock.steps[3].seqs[0].position == 16);
  CHECK(clock.steps[3].seqs[0].proposed == 0);
  const RequestRecord& r = run.requests[0];
  CHECK(r.generated == 10);
  CHECK(r.first_token == 1);
  CHECK(r.finished == 4);
  CHECK(run.verifies == 2);
  CHECK(run.proposed == 6);
  CHECK(run.accepted == 6);
  // TPOT = (E2E − TTFT) / (output − 1) = 3 / 9: three steps for nine tokens.
  CHECK(serve_metrics(run, {}).tpot.mean == doctest::Approx(3.0 / 9.0));
}

TEST_CASE("speculative decoding: accepted lengths drawn as the closed form says") {
  // 200 requests of 400 tokens, k = 4: the tokens a verify yields, away from the requests' ends
  // (where drafts are cut), match (1 − α^(k+1)) / (1 − α) within 2%.
  for (const double alpha : {0.3, 0.7, 0.9}) {
    CAPTURE(alpha);
    std::vector<Request> requests;
    for (int64_t i = 0; i < 200; ++i) requests.push_back(request(i, 0, 16, 400));
    FixedClock clock;
    SchedulerConfig c = speculative(4, alpha);
    c.max_batch = 256;
    const EngineRun run = run_engine(requests, c, KvPool{200000, 4, 1.0}, 1024, 0, clock);
    const ServeMetrics m = serve_metrics(run, {});
    CHECK(m.completed == 200);
    CHECK(m.verifies > 0);
    CHECK(m.tokens_per_verify() == doctest::Approx(speculative_tokens_per_step(alpha, 4)).epsilon(0.02));
  }
}

TEST_CASE("speculative decoding: priced, it pays at light load and costs at heavy load") {
  // Llama-3-8B on a datasheet H100, contexts of 128: a decode of one sequence is bound by its
  // weights, so a verify of 5 rows costs about what a decode costs and yields 2.77 tokens; a
  // verify of 256 sequences (1,280 rows, 20 TFLOP) is bound by compute, about 20 ms for 2.77
  // tokens a sequence, where a plain decode streams the weights in about 5 ms.
  const ModelConfig m = test_models::llama3_8b();
  const Hardware hw = test_models::h100_node();
  const std::vector<StackStep> stack{{"step", {PassSpec{"bf16"}, PassSpec{"flash_attention"}, PassSpec{"paged_kv"}}, ""}};
  StepPricer pricer(m, hw, stack, 0);
  auto per_token = [&](int64_t seqs, bool spec) {
    EngineStep step;
    for (int64_t i = 0; i < seqs; ++i) {
      SeqWork w;
      w.request = i;
      w.position = 128;
      w.tokens = spec ? 5 : 1;
      w.proposed = spec ? 4 : 0;
      step.seqs.push_back(w);
    }
    return pricer.price(step) / (spec ? speculative_tokens_per_step(0.7, 4) : 1.0);
  };
  CHECK(per_token(1, true) < 0.6 * per_token(1, false));
  CHECK(per_token(256, true) > per_token(256, false));
}

TEST_CASE("speculative decoding: its knobs' errors") {
  auto error = [](std::vector<PassSpec> passes) {
    passes.insert(passes.begin(), PassSpec{"paged_kv"});
    try {
      (void)scheduler_config({StackStep{"spec", passes, ""}}, 0);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error({PassSpec{"scheduler", std::nullopt, "continuous"}, PassSpec{"speculative", 4.0}})
            .find("needs 'acceptance'") != std::string::npos);
  CHECK(error({PassSpec{"scheduler", std::nullopt, "continuous"}, PassSpec{"acceptance", 0.7}})
            .find("set 'speculative' too") != std::string::npos);
  CHECK(error({PassSpec{"scheduler", std::nullopt, "static"}, PassSpec{"speculative", 4.0}, PassSpec{"acceptance", 0.7}})
            .find("continuous batching") != std::string::npos);
  CHECK(error({PassSpec{"scheduler", std::nullopt, "continuous"}, PassSpec{"speculative", 4.0},
               PassSpec{"acceptance", 0.7}})
            .empty());
}

TEST_CASE("speculative decoding: a step's verify passes are priced as one batch at their mean position") {
  // 40 verifies of 5 rows at positions 600..795 run in the step's one variable-length kernel:
  // priced as 40 sequences at position 697.5 (rounded), not as 40 launches of one sequence.
  const ModelConfig m = test_models::llama3_8b();
  const Hardware hw = test_models::h100_node();
  const std::vector<StackStep> stack{{"step", {PassSpec{"bf16"}, PassSpec{"flash_attention"}, PassSpec{"paged_kv"}}, ""}};
  StepPricer pricer(m, hw, stack, 0);
  auto step_at = [](const std::vector<int64_t>& positions) {
    EngineStep step;
    for (std::size_t i = 0; i < positions.size(); ++i) {
      SeqWork w;
      w.request = static_cast<int64_t>(i);
      w.position = positions[i];
      w.tokens = 5;
      w.proposed = 4;
      step.seqs.push_back(w);
    }
    return step;
  };
  std::vector<int64_t> spread, mean;
  for (int64_t i = 0; i < 40; ++i) {
    spread.push_back(600 + 5 * i);
    mean.push_back(698);
  }
  CHECK(pricer.price(step_at(spread)) == doctest::Approx(pricer.price(step_at(mean))).epsilon(1e-12));
}

TEST_CASE("speculative: a decode workload's knobs are checked where the step sets them") {
  Workload w;
  w.phase = Phase::decode;
  w.batch = 2, w.prompt = 16, w.new_tokens = 8;
  w.draft_tokens = 3;
  CHECK_THROWS_WITH_AS(validate(w), doctest::Contains("needs 'acceptance'"), ConfigError);
  w.acceptance = 0.5;
  CHECK_NOTHROW(validate(w));
  CHECK(w.tokens_per_step() == doctest::Approx(2 * 1.875));  // (1 − 0.5^4) / 0.5
  w.kv_cache = false;
  CHECK_THROWS_WITH_AS(validate(w), doctest::Contains("kv_cache is off"), ConfigError);
  w.kv_cache = true;
  w.phase = Phase::prefill;
  CHECK_THROWS_WITH_AS(validate(w), doctest::Contains("verifies drafts in decode steps"), ConfigError);
}
