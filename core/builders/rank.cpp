// One rank's share of the model under tensor, sequence, context and pipeline parallelism
// (rank.hpp), and the load-balanced chunks of context parallelism.
#include "core/builders/rank.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/config/parallel.hpp"

namespace perfsim::build {

int64_t RankShape::rows(int64_t tokens) const {
  if (!sp) return tokens;
  if (tokens % tp != 0)
    throw ConfigError(fmt::format(
        "parallel.sp splits the {} tokens of a pass over tp = {} ranks; make batch · sequence a "
        "multiple of {} or turn sp off",
        tokens, tp, tp));
  return tokens / tp;
}

int64_t RankShape::expert_capacity(int64_t tokens) const {
  const double even = static_cast<double>(tokens * top_k) / static_cast<double>(experts);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(capacity_factor * even - 1e-9)));
}

ContextChunks context_chunks(int cp, int rank) {
  if (cp < 1 || rank < 0 || rank >= cp)
    throw ConfigError(fmt::format("context-parallel rank {} is outside 0 .. {} (parallel.cp = {})", rank,
                                  cp - 1, cp));
  return {rank, 2 * cp - 1 - rank};
}

ContextRows context_rows(int cp, int rank, int64_t local_seq) {
  const ContextChunks c = context_chunks(cp, rank);
  ContextRows r;
  r.chunk = local_seq / 2;
  r.first = c.first * r.chunk;
  r.second = c.second * r.chunk;
  return r;
}

RingBlockRows ring_block_rows(int cp, int rank, int step, int64_t local_seq) {
  (void)context_chunks(cp, rank);
  if (step < 0 || step >= cp)
    throw ConfigError(fmt::format("ring attention step {} is outside 0 .. {} (parallel.cp = {})", step, cp - 1, cp));
  RingBlockRows b;
  b.kv_rows = local_seq;
  if (step == 0) {
    b.causal = true;
    return b;
  }
  const int owner = ((rank - step) % cp + cp) % cp;
  if (owner < rank) b.kv_rows = local_seq / 2;
  else b.q_first = local_seq / 2;
  return b;
}

int64_t context_causal_pairs(int64_t seq, int cp, int rank) {
  const ContextChunks c = context_chunks(cp, rank);
  if (cp == 1) return seq * (seq + 1) / 2;  // the whole sequence, of any length
  const int64_t len = seq / (2 * static_cast<int64_t>(cp));
  // Queries at positions p = chunk·len .. chunk·len + len − 1 each see p + 1 keys.
  auto pairs = [&](int chunk) {
    const int64_t first = static_cast<int64_t>(chunk) * len;
    return len * (first + 1) + len * (len - 1) / 2;
  };
  return pairs(c.first) + pairs(c.second);
}

RankShape rank_shape(const ModelConfig& m, const Workload& w, const BuildOptions& o) {
  const ParallelSpec& p = o.parallel;
  RankShape r;
  r.layers = m.layers;
  r.chunk_layers = {m.layers};
  r.heads = m.heads;
  r.kv_heads = m.kv_heads_or_heads();
  r.q_dim = m.hidden;
  r.kv_dim = m.kv_dim();
  r.ffn = m.ffn_hidden;
  r.vocab = m.vocab;
  if (m.moe()) {
    r.experts = r.local_experts = m.experts;
    r.expert_ffn = m.expert_width();
    r.shared_ffn = m.shared_experts * m.expert_width();
    r.top_k = m.top_k;
    r.capacity_factor = m.capacity_factor;
  }
  if (p.tp == 1 && p.pp == 1 && p.cp == 1 && p.ep == 1 && !p.sp && o.stage == 0) return r;  // a single GPU

  validate(p, m, w);
  if (o.stage < 0 || o.stage >= p.pp)
    throw ConfigError(fmt::format("pipeline stage {} is outside 0 .. {} (parallel.pp = {})", o.stage,
                                  p.pp - 1, p.pp));
  r.tp = p.tp;
  r.sp = p.sp && p.tp > 1;  // one rank holds the whole sequence anyway
  r.tp_stride = p.tp_stride();
  r.cp = p.cp;
  r.cp_stride = p.cp_stride();
  r.pp = p.pp;
  r.stage = o.stage;
  r.pp_stride = p.pp_stride();
  r.first_layer = stage_first_layer(m.layers, p.pp, o.stage);
  r.layers = stage_layers(m.layers, p.pp, o.stage);
  r.chunk_first_layer = {r.first_layer};
  r.chunk_layers = {r.layers};
  if (p.pipeline_schedule() == PipelineSchedule::interleaved && p.interleave > 1 && w.phase == Phase::train) {
    // Virtual stages of pp · v: this stage holds stage, stage + pp, ... (one per chunk).
    const int virtual_stages = p.pp * p.interleave;
    r.chunk_first_layer.clear();
    r.chunk_layers.clear();
    r.layers = 0;
    for (int c = 0; c < p.interleave; ++c) {
      const int k = c * p.pp + o.stage;
      r.chunk_first_layer.push_back(stage_first_layer(m.layers, virtual_stages, k));
      r.chunk_layers.push_back(stage_layers(m.layers, virtual_stages, k));
      r.layers += r.chunk_layers.back();
    }
    r.first_layer = r.chunk_first_layer.front();
  }
  // head_dim stays the full model's: each rank holds whole heads.
  r.heads = m.heads / p.tp;
  r.kv_heads = m.kv_heads_or_heads() / p.tp;
  r.q_dim = r.heads * m.head_dim();
  r.kv_dim = r.kv_heads * m.head_dim();
  r.ffn = m.ffn_hidden / p.tp;
  r.vocab = (m.vocab + p.tp - 1) / p.tp;
  if (m.moe()) {
    // Experts split over the expert-parallel ranks, each expert's MLP over the tensor-parallel
    // ones (Megatron-Core with expert tensor parallelism equal to tp).
    r.ep = p.ep;
    r.ep_stride = p.tp;  // consecutive in the cp · dp order (ParallelSpec's rank numbering)
    r.local_experts = m.experts / p.ep;
    r.expert_ffn = m.expert_width() / p.tp;
    r.shared_ffn = m.shared_experts * m.expert_width() / p.tp;
  }
  return r;
}

}  // namespace perfsim::build
