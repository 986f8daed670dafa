// One serving engine step, measured against its price: the packed step graph the executed
// engine runs (build_engine_step, the stack's graph passes, the paged KV pool held by an engine
// session) run as serving runs it, then again with every op timed, beside the cost model's
// price of the same batch (StepPricer, as the serving report prices it) and of each op
// (predict() on the step's own graph). For finding which ops of a step the model misprices.
//   perfsim_bench_engine_step --help
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/registry.hpp"
#include "bench_util.hpp"
#include "core/cost/cost_model.hpp"
#include "core/errors.hpp"
#include "core/run/engine_clock.hpp"
#include "core/serve/kv_blocks.hpp"
#include "dsl/dsl.hpp"

using namespace perfsim;
using namespace perfsim::bench;

namespace {

struct Options {
  std::string backend = "auto", model = "llama-3-8b", profile = "h100-local";
  std::vector<std::string> stack = {"bf16", "flash_attention"};
  int64_t prompts = 8, prompt_len = 1024, cached = 0, vary = 16;
  int64_t decodes = 0, context = 512, block = 16;
  double pool_gib = 0;
  int steps = 5, top = 12;
};

// Step i's batch: the decodes, then the prompts (each `vary` × i tokens longer than step 0's).
EngineStep batch(const Options& o, int i) {
  EngineStep step;
  for (int64_t d = 0; d < o.decodes; ++d) {
    SeqWork w;
    w.tokens = 1;
    w.position = o.context;
    step.seqs.push_back(w);
  }
  for (int64_t p = 0; p < o.prompts; ++p) {
    SeqWork w;
    w.tokens = o.prompt_len + o.vary * i;
    w.position = o.cached;
    step.seqs.push_back(w);
  }
  return step;
}

// Consecutive blocks for each sequence, from block 1 on (page 0 is where holes point).
void place(EngineStep& step, const KvPool& pool) {
  int64_t next = 1;
  step.block_tables.clear();
  for (const SeqWork& w : step.seqs) {
    std::vector<int64_t> table;
    for (int64_t b = 0; b < blocks_for(w.position + w.tokens, pool.block); ++b) table.push_back(next++);
    step.block_tables.push_back(std::move(table));
  }
  if (next > pool.blocks)
    throw ConfigError(fmt::format("--pool-gib: the KV pool holds {} blocks, the step needs {}", pool.blocks, next));
}

// "layer3.mlp.up" -> "mlp.up": one row for the same op of every layer.
std::string role_of(const Op& op) {
  if (op.layer < 0 || op.name.rfind("layer", 0) != 0) return op.name;
  const auto dot = op.name.find('.');
  return dot == std::string::npos ? op.name : op.name.substr(dot + 1);
}

std::string ms(double s) { return fmt::format("{:.3f}", s * 1e3); }
std::string err(double pred, double meas) {
  return meas > 0 ? fmt::format("{:+.1f}%", (pred - meas) / meas * 100) : "-";
}

int run(const Options& o) {
  const ModelConfig model = find_model(o.model);
  const std::vector<std::string> profiles = profile_names();
  const bool is_profile = o.profile.find('/') != std::string::npos || o.profile.ends_with(".lua") ||
                          std::find(profiles.begin(), profiles.end(), o.profile) != profiles.end();
  Hardware hw;
  try {
    hw = is_profile ? load_profile(o.profile) : find_hardware(o.profile);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("--profile: {} (nor is it a profile: {})", e.what(), fmt::join(profiles, ", ")));
  }
  std::vector<StackStep> stack{{"stack", {}, ""}};
  for (const std::string& p : o.stack) stack[0].passes.emplace_back(p);
  StepPricer pricer(model, hw, stack, 0);
  const std::vector<StackStep> graph_stack = engine_graph_stack(stack, 0);

  KvPool pool;
  pool.block = o.block;
  pool.block_bytes = pricer.kv_bytes_per_token() * static_cast<double>(o.block);
  {
    EngineStep last = batch(o, 2 * o.steps);
    int64_t need = 1;
    for (const SeqWork& w : last.seqs) need += blocks_for(w.position + w.tokens, o.block);
    pool.blocks = o.pool_gib > 0 ? static_cast<int64_t>(o.pool_gib * std::pow(2.0, 30) / pool.block_bytes) : need;
  }
  const int64_t table_width = (model.max_seq + o.block - 1) / o.block;
  std::unique_ptr<Backend> backend = make_backend(o.backend);
  std::unique_ptr<EngineSession> session = backend->open_engine(1);
  std::mt19937_64 tokens(1);

  auto plan = [&](int i, EngineStep& step) {
    step = batch(o, i);
    for (const SeqWork& w : step.seqs)
      if (w.position + w.tokens >= model.max_seq)
        throw ConfigError(fmt::format("a sequence of {} tokens exceeds {}'s max_seq {}", w.position + w.tokens,
                                      model.name, model.max_seq));
    place(step, pool);
    return plan_engine_step(step, pool, table_width, model.vocab, tokens);
  };

  EngineStep step;
  const EngineStepPlan first = plan(0, step);
  fmt::print("engine step: {} on {} ({} backend), priced with {}\n", model.name, backend->device().name,
             backend->name(), hw.name);
  fmt::print("  {} prompts of {} tokens (+{} a step) after {} cached, {} decodes at context {}; stack {}\n",
             o.prompts, o.prompt_len, o.vary, o.cached, o.decodes, o.context, fmt::join(o.stack, ", "));
  fmt::print("  KV pool {:.2f} GiB ({} blocks of {} tokens)\n", pool.block_bytes * pool.blocks / std::pow(2.0, 30),
             pool.blocks, o.block);
  // The start-up step: makes and fills the weights and pages (not timed).
  (void)session->run_step(engine_step_graph(model, first.shape, graph_stack), first.inputs);
  fmt::print("  held: {:.2f} GiB\n\n", session->held_bytes() / std::pow(2.0, 30));

  fmt::print("{:<6} {:>4} {:>7} {:>9} {:>10} {:>9} {:>10} {:>9} {:>9}\n", "run", "step", "tokens", "wall ms",
             "device ms", "ops Σ ms", "priced ms", "err wall", "err dev");
  std::map<std::string, std::vector<double>> role_meas;  // op-timed steps: Σ by role, per step
  std::map<std::string, double> role_pred;               // the last op-timed step's prediction
  std::map<std::string, int64_t> role_ops;
  std::size_t last_ops = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const bool by_op = pass == 1;
    for (int i = 0; i < o.steps; ++i) {
      const int shape = by_op ? o.steps + i : i;  // every timed step a shape of its own
      const EngineStepPlan p = plan(o.vary > 0 ? shape + 1 : 0, step);
      const Graph g = engine_step_graph(model, p.shape, graph_stack);
      const StepTimes t = by_op ? session->run_step_ops(g, p.inputs) : session->run_step(g, p.inputs);
      const double price = pricer.price(step);
      const double price_dev = price - pricer.host(step);
      double sum = 0;
      for (double s : t.ops) sum += s;
      fmt::print("{:<6} {:>4} {:>7} {:>9} {:>10} {:>9} {:>10} {:>9} {:>9}\n", by_op ? "by op" : "engine", i,
                 step.tokens(), ms(t.wall), ms(t.device), by_op ? ms(sum) : "-", ms(price), err(price, t.wall),
                 err(price_dev, t.device));
      if (!by_op) continue;
      std::map<std::string, double> step_role;
      for (std::size_t k = 0; k < g.ops.size() && k < t.ops.size(); ++k) step_role[role_of(g.ops[k])] += t.ops[k];
      for (auto& [r, s] : step_role) role_meas[r].push_back(s);
      if (i + 1 == o.steps) {
        const Prediction pred = predict(g, hw);
        role_pred.clear();
        role_ops.clear();
        for (std::size_t k = 0; k < g.ops.size(); ++k) {
          role_pred[role_of(g.ops[k])] += pred.ops[k].time * g.ops[k].count;
          role_ops[role_of(g.ops[k])] += static_cast<int64_t>(g.ops[k].count);
        }
        last_ops = g.ops.size();
      }
    }
  }

  // Per role: the last op-timed step's measured Σ (its shape is the one predicted) and the
  // median over the op-timed steps (the spread of a shape's first run).
  fmt::print("\nops of the last op-timed step, by role (Σ over layers; predicted: the cost model on this graph)\n");
  struct Row {
    std::string role;
    int64_t ops;
    double meas, median, pred;
  };
  std::vector<Row> rows;
  double meas_total = 0, pred_total = 0;
  for (const auto& [r, v] : role_meas) {
    rows.push_back({r, role_ops[r], v.back(), median(v), role_pred[r]});
    meas_total += v.back();
    pred_total += role_pred[r];
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.meas > b.meas; });
  fmt::print("{:<28} {:>5} {:>12} {:>12} {:>13} {:>8} {:>7}\n", "role", "ops", "measured ms", "median ms",
             "predicted ms", "err", "share");
  int shown = 0;
  for (const Row& r : rows) {
    if (shown++ == o.top) break;
    fmt::print("{:<28} {:>5} {:>12} {:>12} {:>13} {:>8} {:>6.1f}%\n", r.role, r.ops, ms(r.meas), ms(r.median),
               ms(r.pred), err(r.pred, r.meas), meas_total > 0 ? r.meas / meas_total * 100 : 0.0);
  }
  fmt::print("{:<28} {:>5} {:>12} {:>12} {:>13} {:>8}\n", "all ops", last_ops, ms(meas_total), "",
             ms(pred_total), err(pred_total, meas_total));
  fmt::print("· err: (predicted − measured) / measured; ops Σ: the op-timed step's ops added up (its gaps excluded)\n");
  fmt::print("· priced: the serving report's price of the batch (StepPricer), err dev against the device without "
             "the engine's host work\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Times one serving engine step (the packed graph the executed engine runs) as serving runs it and "
               "op by op, beside the cost model's price of the same batch and of each op."};
  app.add_option("--backend", o.backend, "cuda, cpu or auto")->capture_default_str();
  app.add_option("--model", o.model, "a model of the zoo (perfsim list models)")->capture_default_str();
  app.add_option("--profile", o.profile, "the profile (or catalog hardware) pricing the step")->capture_default_str();
  app.add_option("--stack", o.stack, "graph passes of the stack (as a scenario's step names them)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--prompts", o.prompts, "prompts (or prompt chunks) in the step")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--prompt-len", o.prompt_len, "tokens each prompt computes in the step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--cached", o.cached, "tokens each prompt already holds in the KV cache")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--vary", o.vary, "tokens each timed step's prompts grow by (a new shape each step, as serving "
                                   "meets them; 0: every step the same)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--decodes", o.decodes, "decoding sequences in the step")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--context", o.context, "tokens each decoding sequence holds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--block", o.block, "KV block size, tokens")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--pool-gib", o.pool_gib, "KV page pool to hold, GiB (0: what the steps need)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--steps", o.steps, "steps timed each way")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--top", o.top, "rows of the per-op table")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.prompts + o.decodes == 0) {
    fmt::print(stderr, "perfsim_bench_engine_step: --prompts and --decodes are both 0: the step has no sequence\n");
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "perfsim_bench_engine_step: {}\n", e.what());
    return 1;
  }
}
