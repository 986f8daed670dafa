// Executed serving runs (serve_execution.hpp): the engine loop on the backend's wall clock, on
// this device or on ranks.
#include "core/run/serve_execution.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>

#include "core/errors.hpp"
#include "core/run/engine_clock.hpp"
#include "core/run/serve_ranks.hpp"
#include "core/serve/disaggregated.hpp"
#include "core/serve/kv_blocks.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

using Executed = ServeStepResult::Executed;

// The executed engine's pool: the predicted one, but no more blocks than every request of the
// run holds at once (so the scheduler meets the same limits while the backend allocates only
// what the run can use).
KvPool executed_pool(const KvPool& predicted, const std::vector<Request>& requests) {
  KvPool pool = predicted;
  int64_t most = 1;
  for (const Request& r : requests) most += blocks_for(r.prompt + r.output, pool.block);
  pool.blocks = std::min(pool.blocks, most);
  return pool;
}

// Runs once the session is primed, before the clock starts, with "" or why priming failed
// (thrown again after it): ranks serving side by side meet there, so none waits for one that
// failed. It may change the requests served (a decode engine learns its requests there).
using BeforeStart = std::function<void(const std::string& failed, std::vector<Request>& requests)>;

// The engine run of `requests` on the session, on its wall clock; its pool is sized for
// `requests` as given. With `followers`, the engine is tensor-parallel over every rank
// (`options` its layout) and this is rank 0, which schedules and sends each step to the others
// (follow_engine). `handoff`: ExecutedClock::set_handoff.
Executed serve_on_clock(const ServeExecution& x, std::vector<Request> requests, const BeforeStart& before_start,
                        const std::function<void(const EngineStep&)>& handoff = {}, const BuildOptions& options = {},
                        Communicator* followers = nullptr) {
  const Scenario& s = x.scenario;
  const auto start = std::chrono::steady_clock::now();
  Executed out;
  const KvPool pool = executed_pool(x.predicted.pool, requests);
  bool cuda_graphs = false;
  for (std::size_t i = 0; i <= x.upto && i < x.stack.size(); ++i)
    for (const PassSpec& p : x.stack[i].passes) cuda_graphs = cuda_graphs || p.name == "cuda_graphs";
  std::optional<ExecutedClock> clock;
  try {
    clock.emplace(x.session, s.model, engine_graph_stack(x.stack, x.upto), pool, s.serve->seed, cuda_graphs, options,
                  followers);
    // The largest step the scheduler forms: its token budget (a static batch's padded prompts
    // may exceed it; 8,192 at most, vLLM's default profiling size).
    clock->prime(std::min<int64_t>(x.predicted.config.step_tokens(s.model.max_seq), 8192));
  } catch (const std::exception& e) {
    before_start(e.what(), requests);
    throw;
  }
  before_start("", requests);
  if (handoff) clock->set_handoff(handoff);
  clock->restart();
  out.run = run_engine(requests, x.predicted.config, pool, s.model.max_seq, s.serve->arrivals.think, *clock);
  out.metrics = serve_metrics(out.run, s.serve->slo);
  ParallelSpec engine = x.predicted.layout;
  engine.dp = 1;
  StepPricer pricer(s.model, x.device, x.stack, x.upto, engine);
  pricer.set_swap_block_bytes(pool.block_bytes);
  clock->price_steps(pricer);
  out.steps = clock->steps();
  out.held_bytes = x.session.held_bytes();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

void alone(const std::string&, std::vector<Request>&) {}

// Why the run would not be made ("" = it is made): its prediction lasts beyond
// execute.serve_seconds.
std::string too_long(const ServeExecution& x) {
  const double predicted = x.predicted.run.end;
  if (predicted <= x.scenario.execute.serve_seconds) return "";
  return fmt::format("predicted to last {} on {}, beyond execute.serve_seconds = {} (the engine runs in real time)",
                     format_duration(predicted), x.device.name, format_sig3(x.scenario.execute.serve_seconds));
}

// `run` with what cannot be executed kept as the reason, not thrown.
template <class Run>
std::string attempt(Run run) {
  try {
    run();
  } catch (const NotExecutable& e) {
    return e.what();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

ExecutedServing execute_serving(const ServeExecution& x, std::string& why) {
  why = too_long(x);
  if (!why.empty()) return std::nullopt;
  return serve_on_clock(x, x.requests, alone);
}

ExecutedServing execute_tensor_parallel(const ServeExecution& x, Communicator& ranks, std::string& why) {
  why = too_long(x);
  if (!why.empty()) return std::nullopt;
  BuildOptions options;
  options.parallel.tp = x.predicted.layout.tp;
  if (ranks.rank() != 0) {
    // A failure here ends every rank (rank 0 would wait in the step's collectives).
    follow_engine(x.session, x.scenario.model, engine_graph_stack(x.stack, x.upto), options, ranks);
    why = "rank 0 reports the engine";
    return std::nullopt;
  }
  Executed out;
  why = attempt([&] { out = serve_on_clock(x, x.requests, alone, {}, options, &ranks); });
  if (!why.empty()) return std::nullopt;
  return out;
}

ExecutedServing execute_replicas(const ServeExecution& x, Communicator& ranks, std::string& why) {
  why = too_long(x);
  if (!why.empty()) return std::nullopt;
  ReplicaShare share;
  std::vector<Request> mine;
  for (const Request& q : x.requests)
    if (x.predicted.replica_of.at(static_cast<std::size_t>(q.id)) == ranks.rank()) {
      Request own = q;
      own.id = static_cast<int64_t>(mine.size());
      mine.push_back(own);
      share.ids.push_back(q.id);
    }
  share.not_executed = attempt([&] {
    share.executed = serve_on_clock(x, mine, [&](const std::string&, std::vector<Request>&) { ranks.barrier(); });
  });
  const std::vector<std::string> packed = ranks.gather_to_root(pack_replica(share));
  if (ranks.rank() != 0) {
    why = "rank 0 reports the replicas";
    return std::nullopt;
  }
  std::vector<ReplicaShare> shares;
  for (std::size_t r = 0; r < packed.size(); ++r) {
    shares.push_back(unpack_replica(packed[r]));
    if (!shares.back().not_executed.empty()) {
      why = fmt::format("rank {}: {}", r, shares.back().not_executed);
      return std::nullopt;
    }
  }
  return join_replicas(shares, x.requests, x.predicted.pool, x.scenario.serve->slo);
}

ExecutedServing execute_disaggregated(const ServeExecution& x, Communicator& ranks, std::string& why) {
  why = too_long(x);
  if (!why.empty()) return std::nullopt;
  const bool prefill_rank = ranks.rank() == 0;
  constexpr int header_tag = 41, ack_tag = 42;
  std::byte ack{1};
  // Once both engines are primed: the first failure of either, on both (a rank that did not
  // fail throws it); else one untimed block sent, which makes the link (NCCL's communicator).
  auto meet = [&](const std::string& failed) {
    const std::vector<std::string> all = ranks.gather_to_root(failed);
    std::string first;
    for (std::size_t r = 0; r < all.size() && first.empty(); ++r)
      if (!all[r].empty()) first = fmt::format("rank {}: {}", r, all[r]);
    broadcast_text(ranks, first);
    if (!first.empty()) {
      if (failed.empty()) throw NotExecutable(first);
      return false;
    }
    if (prefill_rank) x.session.send_pages({0}, 1);
    else x.session.receive_pages({0}, 0);
    return true;
  };

  // Rank 0 runs every prompt to its first token. After the step that ends a prompt, it sends
  // the prompt's pages to rank 1 (a header of its id and block count first) and times the
  // round until rank 1's answer that they are in; its clock stops meanwhile, as the transfer
  // goes beside the engine. Then the plan: the served prompts in the order their prefills
  // ended, each one's first token and transfer.
  std::vector<double> sent(x.requests.size(), -1);
  Executed pre;
  std::string failed;
  if (prefill_rank) {
    std::vector<Request> prompts = x.requests;
    for (Request& r : prompts) r.output = 1;
    bool linked = false;
    auto handoff = [&](const EngineStep& step) {
      for (std::size_t i = 0; i < step.seqs.size(); ++i) {
        const SeqWork& w = step.seqs[i];
        if (w.decodes() || !w.samples || w.padding || w.request < 0) continue;
        const std::vector<int64_t>& blocks = step.block_tables.at(i);
        const auto t0 = std::chrono::steady_clock::now();
        const int64_t header[2] = {w.request, static_cast<int64_t>(blocks.size())};
        ranks.send(header, sizeof header, 1, header_tag);
        x.session.send_pages(blocks, 1);
        ranks.recv(&ack, 1, 1, ack_tag);
        sent.at(static_cast<std::size_t>(w.request)) =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    };
    failed = attempt([&] {
      pre = serve_on_clock(
          x, prompts, [&](const std::string& f, std::vector<Request>&) { linked = meet(f); }, handoff);
    });
    if (linked) {
      const int64_t end[2] = {-1, 0};
      ranks.send(end, sizeof end, 1, header_tag);
      nlohmann::json j;
      j["failed"] = failed;
      std::vector<int64_t> order;
      for (const RequestRecord& r : pre.run.requests)
        if (failed.empty() && r.rejected.empty()) order.push_back(r.request.id);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return pre.run.requests[static_cast<std::size_t>(a)].first_token <
               pre.run.requests[static_cast<std::size_t>(b)].first_token;
      });
      j["order"] = order;
      j["first_token"] = nlohmann::json::array();
      for (int64_t id : order) j["first_token"].push_back(pre.run.requests[static_cast<std::size_t>(id)].first_token);
      j["sent"] = sent;
      std::string text = j.dump();
      broadcast_text(ranks, text);
    }
  }

  // Rank 1 primes its engine, takes each prompt's pages into its pool's first blocks as they
  // come, then decodes each request from its prefill's end plus its transfer, holding its
  // prompt's K/V (the scheduler places it on blocks of its own).
  ReplicaShare decoded;
  if (!prefill_rank) {
    auto receive = [&](const std::string& f, std::vector<Request>& requests) {
      if (!meet(f)) return;
      const KvPool pool = executed_pool(x.predicted.pool, x.requests);
      for (;;) {
        int64_t header[2] = {0, 0};
        ranks.recv(header, sizeof header, 0, header_tag);
        if (header[0] < 0) break;
        std::vector<int64_t> blocks(static_cast<std::size_t>(header[1]));
        for (std::size_t k = 0; k < blocks.size(); ++k) blocks[k] = static_cast<int64_t>(k) % pool.blocks;
        x.session.receive_pages(blocks, 0);
        ranks.send(&ack, 1, 0, ack_tag);
      }
      std::string text;
      broadcast_text(ranks, text);
      const nlohmann::json plan = nlohmann::json::parse(text);
      if (!plan.at("failed").get<std::string>().empty()) throw NotExecutable("rank 0 reports the run");
      const auto order = plan.at("order").get<std::vector<int64_t>>();
      const auto first = plan.at("first_token").get<std::vector<double>>();
      const auto times = plan.at("sent").get<std::vector<double>>();
      // The decode run wants arrivals in time order, ids 0.. in that order.
      requests.clear();
      for (std::size_t k = 0; k < order.size(); ++k) {
        Request d = x.requests[static_cast<std::size_t>(order[k])];
        d.id = static_cast<int64_t>(k);
        d.arrival = first[k] + times.at(static_cast<std::size_t>(order[k]));
        d.kv_ready = d.prompt;
        requests.push_back(d);
        decoded.ids.push_back(order[k]);
      }
    };
    decoded.not_executed = attempt([&] { decoded.executed = serve_on_clock(x, x.requests, receive); });
  }
  const std::vector<std::string> packed = ranks.gather_to_root(prefill_rank ? std::string{} : pack_replica(decoded));
  if (!prefill_rank) {
    why = "rank 0 reports the run";
    return std::nullopt;
  }
  if (!failed.empty()) {
    why = failed;
    return std::nullopt;
  }
  decoded = unpack_replica(packed.at(1));
  if (!decoded.not_executed.empty()) {
    why = "rank 1: " + decoded.not_executed;
    return std::nullopt;
  }
  std::vector<std::size_t> original;
  for (int64_t id : decoded.ids) original.push_back(static_cast<std::size_t>(id));
  const Slo& slo = x.scenario.serve->slo;
  Executed out;
  out.run = join_disaggregated(x.requests, pre.run, decoded.executed.run, original, x.predicted.pool);
  out.metrics = serve_metrics(out.run, slo);
  out.steps = pre.steps;
  out.steps.insert(out.steps.end(), decoded.executed.steps.begin(), decoded.executed.steps.end());
  out.held_bytes = std::max(pre.held_bytes, decoded.executed.held_bytes);
  out.seconds = pre.seconds + decoded.executed.seconds;
  out.replicas.push_back({serve_metrics(pre.run, slo), pre.run, "prefill"});
  out.replicas.push_back({serve_metrics(decoded.executed.run, slo), decoded.executed.run, "decode"});
  out.kv_transfers = std::move(sent);
  out.kv_prefilled.assign(x.requests.size(), -1);
  for (const RequestRecord& r : pre.run.requests)
    if (r.rejected.empty()) out.kv_prefilled.at(static_cast<std::size_t>(r.request.id)) = r.first_token;
  return out;
}

ExecutedServing execute_step(const ServeExecution& x, Communicator* ranks, std::string& why) {
  const ParallelSpec& layout = x.predicted.layout;
  const SchedulerConfig& c = x.predicted.config;
  const int rank_count = ranks != nullptr ? ranks->size() : 1;
  const int replicas = std::max(1, layout.dp);
  const bool split = layout.tp > 1 || layout.pp > 1;
  const bool open_loop = x.scenario.serve->arrivals.kind != ArrivalKind::closed;
  if (c.disaggregated()) {
    if (c.prefill_engines == 1 && c.decode_engines == 1 && !split && rank_count == 2)
      return execute_disaggregated(x, *ranks, why);
    why = fmt::format("{}P{}D is predicted; executed, a 1P1D of one-GPU engines runs on two ranks (perfsim run "
                      "--gpus 2)",
                      c.prefill_engines, c.decode_engines);
    return std::nullopt;
  }
  if (replicas == 1 && layout.tp > 1 && layout.pp == 1 && rank_count == layout.tp)
    return execute_tensor_parallel(x, *ranks, why);
  if (replicas > 1 && !split && rank_count == replicas && open_loop) return execute_replicas(x, *ranks, why);
  if (replicas > 1 || split) {
    why = !split && open_loop
              ? fmt::format("{} is predicted; its replicas execute on as many ranks (perfsim run --gpus {}, or "
                            "mpirun -np {})",
                            describe_engine_layout(layout), replicas, replicas)
              : fmt::format("{} is predicted; executed runs serve one-GPU replicas of open-loop traffic, one a "
                            "rank, or one tensor-parallel engine over every rank (--gpus = tp)",
                            describe_engine_layout(layout));
    return std::nullopt;
  }
  if (rank_count > 1 && ranks->rank() != 0) {
    why = "one engine serves on rank 0";
    return std::nullopt;
  }
  ExecutedServing out;
  if (const std::string failed = attempt([&] { out = execute_serving(x, why); }); !failed.empty()) why = failed;
  return out;
}

}  // namespace perfsim
