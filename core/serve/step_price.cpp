#include "core/serve/step_price.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/cost/cost_model.hpp"
#include "core/cost/roofline.hpp"
#include "core/serve/engine_graph.hpp"

namespace perfsim {

namespace {

// Ops inside a layer that attend: they scale with each sequence's context, not with tokens.
bool attends(const Op& op) {
  const bool appends =
      op.kind == OpKind::kv_append || op.kind == OpKind::paged_kv_append || op.kind == OpKind::varlen_kv_append;
  return op.layer >= 0 && (class_of(op.kind) == OpClass::attention || appends);
}

double lerp(std::pair<double, double> at, double x1, double x2, double x) {
  if (x2 <= x1) return at.first;
  return at.first + (at.second - at.first) * (x - x1) / (x2 - x1);
}

}  // namespace

StepPricer::StepPricer(const ModelConfig& m, const Hardware& hw, const std::vector<StackStep>& stack,
                       std::size_t upto, const ParallelSpec& layout)
    : m_model(m), m_hw(hw) {
  m_layout.tp = std::max(1, layout.tp);
  m_layout.pp = std::max(1, layout.pp);
  for (std::size_t i = 0; i <= upto && i < stack.size(); ++i) {
    StackStep kept{stack[i].name, {}, stack[i].where};
    for (const PassSpec& p : stack[i].passes) {
      if (p.name == "cuda_graphs") {
        m_cuda_graphs = true;
        continue;
      }
      // Only graph passes shape the engine step's graph (an unknown name stays, for its error).
      if (const OptimizationInfo* o = find_optimization(p.name); o != nullptr && o->kind != OptimizationKind::graph)
        continue;
      kept.passes.push_back(p);
    }
    m_stack.push_back(std::move(kept));
  }
  // Two contexts to draw decode attention's line through, within the model's positions.
  m_kv2 = std::max<int64_t>(2, std::min<int64_t>(2048, m.max_seq - 1));
  m_kv1 = std::max<int64_t>(2, std::min<int64_t>(128, m_kv2 / 2));
  for (int stage = 0; stage < m_layout.pp; ++stage) {
    const Graph g = build_stack_graph(m_model, decode(1, m_kv1), m_stack, m_stack.empty() ? 0 : m_stack.size() - 1,
                                      options(stage));
    double kv = 0;
    for (const Tensor& t : g.tensors)
      if (t.role == TensorRole::kv_cache && t.shape.size() >= 2)
        kv += t.bytes() * t.count / static_cast<double>(t.shape[0] * t.shape[1]);
    m_kv_bytes_per_token = std::max(m_kv_bytes_per_token, kv);
    // The host issues every stage's ops (one process per GPU, all issuing at once): the most of one.
    double ops = 0;
    for (const Op& op : g.ops) ops += op.count;
    m_step_ops = std::max(m_step_ops, ops);
  }
  // The executed engine's kernels attend over pages with its varlen kernel: one stage, flash
  // attention and paged KV in the stack, a model it runs (rotary, or ALiBi on one GPU).
  bool flash = false, paged = false;
  for (const StackStep& st : m_stack)
    for (const PassSpec& p : st.passes) {
      flash = flash || p.name == "flash_attention";
      paged = paged || p.name == "paged_kv";
    }
  m_engine_attention = flash && paged && m_layout.pp == 1 && (m.rope || (m.alibi && m_layout.tp == 1));
  if (m_engine_attention) m_engine_stack = engine_graph_stack(m_stack, m_stack.empty() ? 0 : m_stack.size() - 1);
}

BuildOptions StepPricer::options(int stage) const {
  BuildOptions o = BuildOptions::sampled(1);
  o.parallel.tp = m_layout.tp;
  o.parallel.pp = m_layout.pp;
  o.stage = stage;
  return o;
}

int64_t StepPricer::capture_size(int64_t n) {
  if (n <= 0 || n > 512) return 0;
  if (n <= 2) return n;
  if (n <= 4) return 4;
  return (n + 7) / 8 * 8;
}

Workload StepPricer::decode(int64_t batch, int64_t kv) const {
  Workload w;
  w.phase = Phase::decode;
  w.batch = batch;
  w.prompt = std::max<int64_t>(1, kv - 1);  // the step attends prompt + 1 keys
  w.new_tokens = 1;
  return w;
}

StepPricer::Parts StepPricer::priced(const Workload& w, bool graphed) {
  Parts parts;
  for (int stage = 0; stage < m_layout.pp; ++stage) {
    Graph g = build_stack_graph(m_model, w, m_stack, m_stack.empty() ? 0 : m_stack.size() - 1, options(stage));
    g.graphed = graphed;
    ++m_builds;
    const Prediction p = predict(g, m_hw);
    // The head: the ops after the last layer (final norm, last-token slice, lm_head, the
    // vocabulary all-gather), but not a stage's send of its activations, which carries every token.
    std::size_t head_from = g.ops.size();
    for (std::size_t i = g.ops.size(); i-- > 0;) {
      if (g.ops[i].layer >= 0) break;
      head_from = i;
    }
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      const double t = p.ops[i].time * g.ops[i].count;
      const bool stage_edge =
          g.ops[i].kind == OpKind::collective && g.ops[i].attrs.collective == Collective::send_recv;
      if (i >= head_from && !stage_edge) parts.head += t;
      else if (attends(g.ops[i])) parts.attention += t;
      else parts.dense += t;
    }
  }
  return parts;
}

double StepPricer::dense(int64_t tokens, bool graphed) {
  if (tokens <= 0) return 0;
  auto& memo = m_dense[graphed ? 1 : 0];
  if (auto it = memo.find(tokens); it != memo.end()) return it->second;
  const Parts p = priced(decode(tokens, 2), graphed);
  m_head[graphed ? 1 : 0].emplace(tokens, p.head);
  return memo[tokens] = p.dense;
}

double StepPricer::head(int64_t seqs, bool graphed) {
  if (seqs <= 0) return 0;
  auto& memo = m_head[graphed ? 1 : 0];
  if (auto it = memo.find(seqs); it != memo.end()) return it->second;
  (void)dense(seqs, graphed);
  return memo.at(seqs);
}

double StepPricer::decode_attention(int64_t seqs, double mean_kv, bool graphed) {
  if (seqs <= 0) return 0;
  auto& memo = m_decode[graphed ? 1 : 0];
  auto it = memo.find(seqs);
  if (it == memo.end()) {
    const double a1 = m_engine_attention ? engine_decode_attention(seqs, m_kv1, graphed)
                                         : priced(decode(seqs, m_kv1), graphed).attention;
    const double a2 = m_engine_attention ? engine_decode_attention(seqs, m_kv2, graphed)
                                         : priced(decode(seqs, m_kv2), graphed).attention;
    it = memo.emplace(seqs, std::make_pair(a1, a2)).first;
  }
  return lerp(it->second, static_cast<double>(m_kv1), static_cast<double>(m_kv2), mean_kv);
}

double StepPricer::engine_decode_attention(int64_t seqs, int64_t kv, bool graphed) {
  EngineStepShape shape;
  shape.q_len.assign(static_cast<std::size_t>(seqs), 1);
  shape.kv_len.assign(static_cast<std::size_t>(seqs), kv);
  shape.sampled = seqs;
  shape.table_width = (m_model.max_seq + shape.kv_block - 1) / shape.kv_block;
  shape.pool_blocks = seqs * ((kv + shape.kv_block - 1) / shape.kv_block) + 1;
  Graph g = engine_step_graph(m_model, shape, m_engine_stack, options(0));
  g.graphed = graphed;
  ++m_builds;
  const Prediction p = predict(g, m_hw);
  double t = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (attends(g.ops[i])) t += p.ops[i].time * g.ops[i].count;
  return t;
}

double StepPricer::prefill_attention(int64_t seqs, int64_t tokens, int64_t position) {
  if (seqs <= 0 || tokens <= 0) return 0;
  const int64_t p2 = std::min<int64_t>(2048, m_model.max_seq - tokens - 1);
  auto key = std::make_pair(seqs, tokens);
  auto it = m_prefill.find(key);
  if (it == m_prefill.end()) {
    auto at = [&](int64_t p) {
      Workload w;
      w.phase = Phase::prefill;
      w.batch = seqs;
      w.prompt = p + tokens;
      w.cached = p;
      w.new_tokens = 1;
      return priced(w, false).attention;
    };
    const double a1 = at(0);
    const double a2 = p2 >= 1 ? at(p2) : a1;
    it = m_prefill.emplace(key, std::make_pair(a1, a2)).first;
  }
  return lerp(it->second, 0.0, static_cast<double>(std::max<int64_t>(p2, 0)), static_cast<double>(position));
}

double StepPricer::memory_besides_kv(int64_t step_tokens, int64_t max_seqs) {
  // The GPU that holds the most besides its KV cache, over the stages.
  auto besides = [&](const Workload& w) {
    double most = 0;
    for (int stage = 0; stage < m_layout.pp; ++stage) {
      const Graph g = build_stack_graph(m_model, w, m_stack, m_stack.empty() ? 0 : m_stack.size() - 1, options(stage));
      const MemoryBreakdown mem = predict_memory(g, m_hw, true);
      auto kv = mem.by_role.find(TensorRole::kv_cache);
      most = std::max(most, mem.peak - (kv == mem.by_role.end() ? 0.0 : kv->second));
    }
    return most;
  };
  const int64_t tokens = std::max<int64_t>(1, step_tokens);
  // Prompts fill the step: as many sequences of up to max_seq - 1 tokens as it takes.
  const int64_t longest = std::max<int64_t>(1, std::min(tokens, m_model.max_seq - 1));
  Workload prompts;
  prompts.phase = Phase::prefill;
  prompts.batch = (tokens + longest - 1) / longest;
  prompts.prompt = longest;
  prompts.new_tokens = 1;
  const double decodes = besides(decode(std::clamp<int64_t>(max_seqs, 1, tokens), 2));
  return std::max(decodes, besides(prompts));
}

bool StepPricer::replayed(const EngineStep& step) const {
  const auto n = static_cast<int64_t>(step.seqs.size());
  return m_cuda_graphs && capture_size(n) > 0 &&
         std::all_of(step.seqs.begin(), step.seqs.end(), [](const SeqWork& s) { return s.decodes(); });
}

double StepPricer::host(const EngineStep& step) const {
  if (step.empty()) return 0;
  if (replayed(step)) return m_hw.host_overhead;
  return m_hw.host_overhead + m_hw.engine_host_per_step + m_hw.engine_host_per_op * m_step_ops;
}

double StepPricer::price(const EngineStep& step) {
  if (step.empty()) return 0;
  int64_t decodes = 0;
  double kv_sum = 0;
  std::map<std::pair<int64_t, int64_t>, int64_t> chunks;  // (tokens, position) -> sequences
  // Speculative verify passes by rows: their count and the sum of their positions. They run
  // together in the step's one variable-length kernel, alike but for their contexts, so each
  // group is priced as one batch at its mean position (not a launch a sequence, as a chunk is).
  std::map<int64_t, std::pair<int64_t, double>> verifies;
  for (const SeqWork& s : step.seqs) {
    if (s.decodes()) {
      ++decodes;
      kv_sum += static_cast<double>(s.position + 1);
    } else if (s.proposed > 0) {
      auto& [seqs, positions] = verifies[s.tokens];
      ++seqs;
      positions += static_cast<double>(s.position);
    } else {
      ++chunks[{s.tokens, s.position}];
    }
  }
  double t = host(step);
  const double swap_blocks = static_cast<double>(step.swap_in_blocks + step.swap_out_blocks);
  if (swap_blocks > 0) t += transfer_time(swap_blocks * m_swap_block_bytes, true, m_hw);
  const int64_t n = static_cast<int64_t>(step.seqs.size());
  if (replayed(step)) {
    const int64_t b = capture_size(n);
    return t + dense(b, true) + head(b, true) + decode_attention(b, kv_sum / static_cast<double>(n), true);
  }
  t += dense(step.tokens()) + head(step.sampled());
  if (decodes > 0) t += decode_attention(decodes, kv_sum / static_cast<double>(decodes));
  for (const auto& [shape, seqs] : chunks) t += prefill_attention(seqs, shape.first, shape.second);
  for (const auto& [rows, group] : verifies)
    t += prefill_attention(group.first, rows,
                           static_cast<int64_t>(std::llround(group.second / static_cast<double>(group.first))));
  return t;
}

}  // namespace perfsim
