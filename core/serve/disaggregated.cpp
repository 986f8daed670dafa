// Disaggregated prefill and decode (disaggregated.hpp): the prefill engines' run, the KV
// transfers it gives, the decode engines' run on those arrivals, and the two joined per request.
#include "core/serve/disaggregated.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/cost/roofline.hpp"
#include "core/errors.hpp"
#include "core/serve/router.hpp"

namespace perfsim {

namespace {

// `group` engine loops a replica (its pipeline's batches in flight), each priced by `pricer`.
struct Engines {
  std::vector<PricedClock> clocks;
  std::vector<StepClock*> pointers;
  Engines(StepPricer& pricer, int replicas, int group)
      : clocks(static_cast<std::size_t>(replicas * group), PricedClock(pricer)) {
    for (PricedClock& c : clocks) pointers.push_back(&c);
  }
};

// The replicas of one side: each replica's run (the run itself when there is one), labelled.
void add_replicas(ServePrediction& out, ReplicasRun& run, const std::string& role, const Slo& slo) {
  if (run.replicas.empty()) {
    out.replicas.push_back({serve_metrics(run.merged, slo), run.merged, role});
    return;
  }
  for (EngineRun& r : run.replicas) {
    ServeMetrics m = serve_metrics(r, slo);
    out.replicas.push_back({std::move(m), std::move(r), role});
  }
}

}  // namespace

double kv_transfer_seconds(double bytes, const Hardware& hw, int gpus) {
  if (bytes <= 0) return 0;
  const bool one_node = hw.gpus_per_node <= 0 || gpus <= hw.gpus_per_node;
  // Two GPUs of one node are adjacent; across nodes they are a node apart.
  const int stride = one_node ? 1 : hw.gpus_per_node;
  const std::optional<double> t = collective_time(Collective::send_recv, 2, bytes, hw, stride);
  // Ranks of a CPU on one host hand the bytes over through its memory: one copy.
  const double copy = hw.host_copy_bandwidth > 0 ? hw.host_copy_bandwidth : hw.memory_bandwidth;
  if (!t && hw.kind == "cpu" && one_node && copy > 0) return bytes / copy;
  if (!t)
    throw ConfigError(fmt::format("{} describes no link between GPUs{} to price the KV transfer of disaggregated "
                                  "serving; give it nvlink or infiniband figures",
                                  hw.name, one_node ? "" : " of different nodes"));
  return *t;
}

double kv_transfer_exposed(double seconds, bool layerwise, double prefill, int64_t layers) {
  if (!layerwise || layers <= 1) return seconds;
  const double l = static_cast<double>(layers);
  return std::max(seconds / l, seconds - prefill * (l - 1) / l);
}

EngineRun join_disaggregated(const std::vector<Request>& requests, const EngineRun& prefill, const EngineRun& decode,
                             const std::vector<std::size_t>& original, const KvPool& pool) {
  EngineRun run;
  run.pool = pool;
  run.requests = prefill.requests;
  for (std::size_t i = 0; i < requests.size() && i < run.requests.size(); ++i) run.requests[i].request = requests[i];
  for (std::size_t d = 0; d < original.size(); ++d) {
    const std::size_t i = original[d];
    const RequestRecord& rec = decode.requests.at(d);
    RequestRecord& joined = run.requests.at(i);
    joined.request = requests[i];
    joined.rejected = rec.rejected;
    joined.first_token = rec.first_token;
    joined.finished = rec.finished;
    joined.generated = rec.generated;
    joined.preemptions += rec.preemptions;
  }
  run.start = std::min(prefill.start, decode.start);
  run.end = run.start;
  for (const RequestRecord& r : run.requests)
    if (r.rejected.empty()) run.end = std::max(run.end, r.finished);
  run.steps = prefill.steps;
  run.steps.insert(run.steps.end(), decode.steps.begin(), decode.steps.end());
  run.itl = decode.itl;
  run.preemptions = prefill.preemptions + decode.preemptions;
  run.verifies = decode.verifies;  // speculative decoding happens on the decode side
  run.proposed = decode.proposed;
  run.accepted = decode.accepted;
  return run;
}

ServePrediction predict_disaggregated(const ModelConfig& m, const Hardware& hw, const ServeSpec& spec,
                                      const std::vector<Request>& requests, ServePrediction out, StepPricer& pricer) {
  const SchedulerConfig& c = out.config;
  for (const Request& r : requests)
    if (r.user >= 0)
      throw ConfigError("disaggregated serving (prefill_engines, decode_engines) takes open-loop arrivals "
                        "(poisson, gamma, ramp, a trace); closed{} clients are not modelled with it");
  const int in_flight = out.layout.pp;
  KvPool share = out.pool;
  share.blocks = out.pool.blocks / in_flight;
  if (share.blocks < 1)
    throw DoesNotFit(fmt::format("{} on {}: the KV pool of {} blocks cannot hold a block for each of the pp = {} "
                                 "batches in flight; use fewer stages or more memory",
                                 m.name, hw.name, out.pool.blocks, in_flight));

  // The prefill engines compute each prompt and its first token.
  std::vector<Request> prompts = requests;
  for (Request& r : prompts) r.output = 1;
  Engines prefill(pricer, c.prefill_engines, in_flight);
  ReplicasRun pre = run_replicas(prompts, c, share, m.max_seq, 0, prefill.pointers, c.router, in_flight);

  // Each prompt's KV crosses to a decode GPU; the decode engine takes it when it has arrived.
  KvTransfers t;
  t.bytes_per_token = pricer.kv_bytes_per_token();
  const int gpus = (c.prefill_engines + c.decode_engines) * out.layout.tp * out.layout.pp;
  const bool one_node = hw.gpus_per_node <= 0 || gpus <= hw.gpus_per_node;
  const bool through_memory = hw.kind == "cpu" && hw.nvlink.bandwidth <= 0 && hw.pcie.bandwidth <= 0;
  t.link = through_memory ? "host memory" : one_node ? "NVLink" : "network";
  t.seconds.assign(requests.size(), -1);
  t.exposed.assign(requests.size(), -1);
  t.prefill_of.assign(requests.size(), -1);
  t.prefilled.assign(requests.size(), -1);
  std::vector<Request> decodes;
  std::vector<std::size_t> original;  // decode request id -> request id
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const RequestRecord& p = pre.merged.requests[i];
    if (!p.rejected.empty()) continue;
    t.prefill_of[i] = pre.replica_of[i];
    t.prefilled[i] = p.first_token;
    const double bytes = static_cast<double>(requests[i].prompt) * t.bytes_per_token;
    t.seconds[i] = kv_transfer_seconds(bytes, hw, gpus);
    t.exposed[i] = kv_transfer_exposed(t.seconds[i], c.kv_layerwise, p.first_token - p.admitted, m.layers);
    Request d = requests[i];
    d.id = static_cast<int64_t>(decodes.size());
    d.arrival = p.first_token + t.exposed[i];
    d.kv_ready = d.prompt;
    decodes.push_back(d);
    original.push_back(i);
  }
  Engines decode(pricer, c.decode_engines, in_flight);
  ReplicasRun dec = run_replicas(decodes, c, share, m.max_seq, 0, decode.pointers, RouterPolicy::least_outstanding,
                                 in_flight);

  out.run = join_disaggregated(requests, pre.merged, dec.merged, original, out.pool);
  EngineRun& run = out.run;
  std::stable_sort(run.steps.begin(), run.steps.end(),
                   [](const StepRecord& a, const StepRecord& b) { return a.start < b.start; });
  out.replica_of.assign(requests.size(), -1);
  for (std::size_t d = 0; d < decodes.size(); ++d)
    out.replica_of[original[d]] = c.prefill_engines + (dec.replica_of.empty() ? 0 : dec.replica_of[d]);
  out.metrics = serve_metrics(run, spec.slo);
  add_replicas(out, pre, "prefill", spec.slo);
  add_replicas(out, dec, "decode", spec.slo);
  out.transfers = std::move(t);
  return out;
}

}  // namespace perfsim
