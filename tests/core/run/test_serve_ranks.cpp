// Replicas executed on ranks: a rank's run survives packing for rank 0, and the replicas join
// into the service's run by request id as the predicted run joins its replicas.
#include <doctest/doctest.h>

#include "core/run/serve_ranks.hpp"

using namespace perfsim;

namespace {

RequestRecord served(int64_t id, double arrival, double first, double finished, int64_t output) {
  RequestRecord r;
  r.request.id = id;
  r.request.arrival = arrival;
  r.request.prompt = 10;
  r.request.output = output;
  r.admitted = arrival;
  r.first_token = first;
  r.finished = finished;
  r.generated = output;
  return r;
}

}  // namespace

TEST_CASE("serve ranks: a replica's run packs and unpacks unchanged") {
  ReplicaShare share;
  share.ids = {3, 1};
  EngineRun& run = share.executed.run;
  run.requests = {served(0, 0.5, 0.6, 0.9, 4), served(1, 0.1, 0.2, 0.4, 2)};
  run.requests[1].cached_tokens = 8;
  run.steps.push_back(StepRecord{0.1, 0.05, 1, 10, 10, 0, 0, 1, 0});
  run.itl = {0.1, 0.15};
  run.start = 0.1;
  run.end = 0.9;
  share.executed.steps.push_back({0.05, 0.04, 0.01, 0.06, 0.02});
  share.executed.held_bytes = 1024;
  const ReplicaShare back = unpack_replica(pack_replica(share));
  CHECK(back.ids == share.ids);
  REQUIRE(back.executed.run.requests.size() == 2);
  CHECK(back.executed.run.requests[1].cached_tokens == 8);
  CHECK(back.executed.run.requests[0].finished == 0.9);
  CHECK(back.executed.run.steps.at(0).tokens == 10);
  CHECK(back.executed.steps.at(0).predicted == 0.06);
  CHECK(back.executed.run.itl == run.itl);
  CHECK(back.executed.held_bytes == 1024);
  CHECK_THROWS_AS((void)unpack_replica("{\"ids\": [1]}"), std::runtime_error);
}

TEST_CASE("serve ranks: replicas join by request id; each keeps its own metrics") {
  // Requests 0 and 2 on replica 0, 1 on replica 1 (each numbered 0.. on its rank).
  std::vector<Request> requests(3);
  for (int64_t i = 0; i < 3; ++i) {
    requests[static_cast<std::size_t>(i)].id = i;
    requests[static_cast<std::size_t>(i)].arrival = 0.1 * static_cast<double>(i);
    requests[static_cast<std::size_t>(i)].prompt = 10;
    requests[static_cast<std::size_t>(i)].output = 3;
  }
  ReplicaShare a, b;
  a.ids = {0, 2};
  a.executed.run.requests = {served(0, 0.0, 0.05, 0.20, 3), served(1, 0.2, 0.26, 0.50, 3)};
  a.executed.run.start = 0.0;
  a.executed.run.end = 0.5;
  b.ids = {1};
  b.executed.run.requests = {served(0, 0.1, 0.12, 0.30, 3)};
  b.executed.run.start = 0.1;
  b.executed.run.end = 0.3;
  const ServeStepResult::Executed x = join_replicas({a, b}, requests, KvPool{100, 16, 1.0}, Slo{});
  REQUIRE(x.run.requests.size() == 3);
  CHECK(x.run.requests[1].first_token == 0.12);  // replica 1's only request is request 1
  CHECK(x.run.requests[2].finished == 0.50);
  CHECK(x.run.requests[2].request.id == 2);
  CHECK(x.metrics.completed == 3);
  CHECK(x.metrics.duration == doctest::Approx(0.5));
  REQUIRE(x.replicas.size() == 2);
  CHECK(x.replicas[0].metrics.completed == 2);
  CHECK(x.replicas[1].metrics.completed == 1);
  // TTFT of the service: 0.05, 0.02, 0.06 s.
  CHECK(x.metrics.ttft.median == doctest::Approx(0.05));
}
