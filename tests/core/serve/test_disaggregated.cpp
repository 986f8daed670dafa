// Disaggregated prefill and decode: a KV transfer's time from its bytes and the link, the part a
// layer-by-layer transfer leaves exposed, and one request through 1P1D worked out step by step.
#include <doctest/doctest.h>

#include "core/errors.hpp"
#include "core/serve/disaggregated.hpp"
#include "core/serve/traffic.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;

TEST_CASE("disaggregated: a KV transfer is a send between two GPUs over the link they share") {
  const Hardware hw = test_models::h100_node();  // NVLink 450 GB/s, 3 µs; InfiniBand 50 GB/s, 5 µs
  const double mib = 1024.0 * 1024.0;
  // Two engines on one node of 8 GPUs: NVLink, 3 µs + 1 MiB / 450 GB/s = 5.330 µs.
  CHECK(kv_transfer_seconds(mib, hw, 2) == doctest::Approx(3e-6 + mib / 450e9));
  CHECK(kv_transfer_seconds(mib, hw, 2) == doctest::Approx(5.330e-6).epsilon(1e-3));
  // Engines of 16 GPUs in all cross nodes: 5 µs + 1 MiB / 50 GB/s = 25.97 µs.
  CHECK(kv_transfer_seconds(mib, hw, 16) == doctest::Approx(5e-6 + mib / 50e9));
  CHECK(kv_transfer_seconds(0, hw, 2) == 0);
  Hardware bare;
  bare.name = "bare";
  CHECK_THROWS_AS((void)kv_transfer_seconds(mib, bare, 2), ConfigError);
}

TEST_CASE("disaggregated: a layer-by-layer transfer leaves the last layer's share, or what the prefill cannot hide") {
  // Sent after the prefill: all of it.
  CHECK(kv_transfer_exposed(8e-3, false, 100e-3, 32) == doctest::Approx(8e-3));
  // 32 layers, 8 ms of transfer beside 100 ms of prefill: the last layer's 0.25 ms.
  CHECK(kv_transfer_exposed(8e-3, true, 100e-3, 32) == doctest::Approx(0.25e-3));
  // A link slower than the layers: 80 ms of transfer, 32 ms of prefill: 80 − 32·31/32 = 49 ms.
  CHECK(kv_transfer_exposed(80e-3, true, 32e-3, 32) == doctest::Approx(49e-3));
}

TEST_CASE("disaggregated: one request through 1P1D: prefill, transfer, then its tokens on the decode engine") {
  const ModelConfig m = test_models::tiny_llama();
  const Hardware hw = test_models::h100_node();
  std::vector<StackStep> stack = {
      StackStep{"1P1D",
                {PassSpec{"bf16"}, PassSpec{"flash_attention"}, PassSpec{"paged_kv"}, PassSpec{"prefill_engines", 1.0},
                 PassSpec{"decode_engines", 1.0}},
                ""}};
  ServeSpec spec;
  Request r;
  r.id = 0;
  r.arrival = 0.5;
  r.prompt = 64;
  r.output = 4;
  const ServePrediction p = predict_serving(m, hw, spec, {r}, stack, 0);
  REQUIRE(p.transfers);
  // By hand with a pricer of the same engine: the prompt in one step on the prefill engine...
  StepPricer pricer(m, hw, stack, 0);
  EngineStep prompt;
  prompt.seqs.push_back(SeqWork{0, 64, 0, true, false});
  const double prefilled = 0.5 + pricer.price(prompt);
  // ...its 64 tokens of KV to the decode engine over NVLink...
  const double sent = kv_transfer_seconds(64 * pricer.kv_bytes_per_token(), hw, 2);
  CHECK(p.transfers->seconds[0] == doctest::Approx(sent));
  CHECK(p.transfers->exposed[0] == doctest::Approx(sent));
  // ...which computes the last prompt token (the first output token), then three decodes.
  double t = prefilled + sent;
  EngineStep last;
  last.seqs.push_back(SeqWork{0, 1, 63, true, false});
  t += pricer.price(last);
  const RequestRecord& rec = p.run.requests[0];
  CHECK(rec.first_token == doctest::Approx(t));
  for (int64_t pos = 64; pos < 67; ++pos) {
    EngineStep d;
    d.seqs.push_back(SeqWork{0, 1, pos, true, false});
    t += pricer.price(d);
  }
  CHECK(rec.finished == doctest::Approx(t));
  CHECK(rec.generated == 4);
  CHECK(rec.request.arrival == 0.5);  // the client's arrival, not the decode engine's
  // One prefill and one decode engine, in that order.
  REQUIRE(p.replicas.size() == 2);
  CHECK(p.replicas[0].role == "prefill");
  CHECK(p.replicas[1].role == "decode");
  CHECK(p.replica_of[0] == 1);
  // TTFT holds the prefill and the transfer: later than a single engine's first token.
  std::vector<StackStep> single = {StackStep{"one", {PassSpec{"bf16"}, PassSpec{"flash_attention"}, PassSpec{"paged_kv"}}, ""}};
  CHECK(predict_serving(m, hw, spec, {r}, single, 0).run.requests[0].first_token < rec.first_token);
}

TEST_CASE("disaggregated: knobs come in pairs, need continuous batching and open-loop traffic") {
  const ModelConfig m = test_models::tiny_llama();
  const Hardware hw = test_models::h100_node();
  ServeSpec spec;
  Request r;
  r.prompt = 8;
  r.output = 2;
  auto with = [](std::vector<PassSpec> passes) {
    passes.insert(passes.begin(), {PassSpec{"flash_attention"}, PassSpec{"paged_kv"}});
    return std::vector<StackStep>{StackStep{"s", std::move(passes), ""}};
  };
  CHECK_THROWS_WITH_AS((void)predict_serving(m, hw, spec, {r}, with({PassSpec{"prefill_engines", 1.0}}), 0),
                       doctest::Contains("needs both prefill_engines and decode_engines"), ConfigError);
  CHECK_THROWS_WITH_AS((void)predict_serving(m, hw, spec, {r},
                                             with({PassSpec{"scheduler", std::nullopt, "static"},
                                                   PassSpec{"prefill_engines", 1.0}, PassSpec{"decode_engines", 1.0}}),
                                             0),
                       doctest::Contains("set scheduler = \"continuous\""), ConfigError);
  Request client = r;
  client.user = 0;
  CHECK_THROWS_WITH_AS((void)predict_serving(m, hw, spec, {client},
                                             with({PassSpec{"prefill_engines", 1.0}, PassSpec{"decode_engines", 1.0}}),
                                             0),
                       doctest::Contains("open-loop arrivals"), ConfigError);
  ParallelSpec dp2;
  dp2.dp = 2;
  CHECK_THROWS_WITH_AS((void)predict_serving(m, hw, spec, {r},
                                             with({PassSpec{"prefill_engines", 1.0}, PassSpec{"decode_engines", 1.0}}),
                                             0, dp2),
                       doctest::Contains("leave dp = 1"), ConfigError);
}
