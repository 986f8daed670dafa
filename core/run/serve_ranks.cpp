// Packing a rank's executed replica for rank 0, and joining the replicas (serve_ranks.hpp).
#include "core/run/serve_ranks.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>

namespace perfsim {

namespace {

using nlohmann::json;

json pack(const RequestRecord& r) {
  return {r.request.id, r.request.arrival, r.request.prompt, r.request.output, r.rejected, r.admitted,
          r.first_token, r.finished, r.generated, r.preemptions, r.cached_tokens};
}

RequestRecord unpack_record(const json& j) {
  RequestRecord r;
  r.request.id = j.at(0).get<int64_t>();
  r.request.arrival = j.at(1).get<double>();
  r.request.prompt = j.at(2).get<int64_t>();
  r.request.output = j.at(3).get<int64_t>();
  r.rejected = j.at(4).get<std::string>();
  r.admitted = j.at(5).get<double>();
  r.first_token = j.at(6).get<double>();
  r.finished = j.at(7).get<double>();
  r.generated = j.at(8).get<int64_t>();
  r.preemptions = j.at(9).get<int64_t>();
  r.cached_tokens = j.at(10).get<int64_t>();
  return r;
}

json pack(const StepRecord& s) {
  return {s.start, s.duration, s.seqs, s.tokens, s.prefill_tokens, s.decodes, s.waiting, s.kv_used_blocks,
          s.swap_blocks};
}

StepRecord unpack_step(const json& j) {
  StepRecord s;
  s.start = j.at(0).get<double>();
  s.duration = j.at(1).get<double>();
  s.seqs = j.at(2).get<int32_t>();
  s.tokens = j.at(3).get<int32_t>();
  s.prefill_tokens = j.at(4).get<int32_t>();
  s.decodes = j.at(5).get<int32_t>();
  s.waiting = j.at(6).get<int32_t>();
  s.kv_used_blocks = j.at(7).get<int64_t>();
  s.swap_blocks = j.at(8).get<int64_t>();
  return s;
}

}  // namespace

std::string pack_replica(const ReplicaShare& share) {
  const ServeStepResult::Executed& x = share.executed;
  json j;
  j["ids"] = share.ids;
  j["not_executed"] = share.not_executed;
  json requests = json::array(), steps = json::array(), measured = json::array();
  for (const RequestRecord& r : x.run.requests) requests.push_back(pack(r));
  for (const StepRecord& s : x.run.steps) steps.push_back(pack(s));
  for (const ExecutedStep& e : x.steps) measured.push_back({e.wall, e.device, e.host, e.predicted, e.predicted_host});
  j["requests"] = std::move(requests);
  j["steps"] = std::move(steps);
  j["measured"] = std::move(measured);
  j["itl"] = x.run.itl;
  j["run"] = {x.run.preemptions, x.run.batches, x.run.kv_capped_batches, x.run.kv_capped_smallest, x.run.start,
              x.run.end, x.run.pool.blocks, x.run.pool.block, x.run.pool.block_bytes};
  j["held_bytes"] = x.held_bytes;
  j["seconds"] = x.seconds;
  return j.dump();
}

ReplicaShare unpack_replica(const std::string& text) {
  ReplicaShare share;
  try {
    const json j = json::parse(text);
    share.ids = j.at("ids").get<std::vector<int64_t>>();
    share.not_executed = j.at("not_executed").get<std::string>();
    ServeStepResult::Executed& x = share.executed;
    for (const json& r : j.at("requests")) x.run.requests.push_back(unpack_record(r));
    for (const json& s : j.at("steps")) x.run.steps.push_back(unpack_step(s));
    for (const json& e : j.at("measured"))
      x.steps.push_back({e.at(0).get<double>(), e.at(1).get<double>(), e.at(2).get<double>(), e.at(3).get<double>(),
                         e.at(4).get<double>()});
    x.run.itl = j.at("itl").get<std::vector<double>>();
    const json& r = j.at("run");
    x.run.preemptions = r.at(0).get<int64_t>();
    x.run.batches = r.at(1).get<int64_t>();
    x.run.kv_capped_batches = r.at(2).get<int64_t>();
    x.run.kv_capped_smallest = r.at(3).get<int64_t>();
    x.run.start = r.at(4).get<double>();
    x.run.end = r.at(5).get<double>();
    x.run.pool = {r.at(6).get<int64_t>(), r.at(7).get<int64_t>(), r.at(8).get<double>()};
    x.held_bytes = j.at("held_bytes").get<double>();
    x.seconds = j.at("seconds").get<double>();
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("a rank's executed replica could not be read: ") + e.what());
  }
  if (share.ids.size() != share.executed.run.requests.size())
    throw std::runtime_error("a rank's executed replica names as many ids as requests");
  return share;
}

ServeStepResult::Executed join_replicas(const std::vector<ReplicaShare>& shares, const std::vector<Request>& requests,
                                        const KvPool& pool, const Slo& slo) {
  ServeStepResult::Executed out;
  EngineRun& run = out.run;
  run.pool = pool;
  run.requests.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    run.requests[i].request = requests[i];
    run.requests[i].rejected = "not sent to any replica";
  }
  bool first = true;
  for (const ReplicaShare& share : shares) {
    const ServeStepResult::Executed& x = share.executed;
    EngineRun own = x.run;
    for (std::size_t k = 0; k < share.ids.size(); ++k) {
      const auto id = static_cast<std::size_t>(share.ids[k]);
      if (id >= requests.size()) throw std::runtime_error("a rank's executed replica names an unknown request");
      RequestRecord rec = own.requests[k];
      rec.request = requests[id];
      run.requests[id] = rec;
      own.requests[k] = rec;
    }
    run.steps.insert(run.steps.end(), own.steps.begin(), own.steps.end());
    out.steps.insert(out.steps.end(), x.steps.begin(), x.steps.end());
    run.itl.insert(run.itl.end(), own.itl.begin(), own.itl.end());
    run.preemptions += own.preemptions;
    run.batches += own.batches;
    run.kv_capped_batches += own.kv_capped_batches;
    if (own.kv_capped_batches > 0)
      run.kv_capped_smallest = run.kv_capped_smallest == 0 ? own.kv_capped_smallest
                                                           : std::min(run.kv_capped_smallest, own.kv_capped_smallest);
    run.start = first ? own.start : std::min(run.start, own.start);
    run.end = first ? own.end : std::max(run.end, own.end);
    first = false;
    out.held_bytes = std::max(out.held_bytes, x.held_bytes);
    out.seconds = std::max(out.seconds, x.seconds);
    ServeMetrics m = serve_metrics(own, slo);
    out.replicas.push_back({std::move(m), std::move(own), ""});
  }
  out.metrics = serve_metrics(run, slo);
  return out;
}

}  // namespace perfsim
