// Inference graphs: prefill over the prompt (filling the KV cache) and one decode step
// (with the KV cache, or recomputing the whole context when the cache is off), for one rank:
// a pipeline stage receives its input from the previous stage and sends its output on, and
// only the last stage runs the head; a context-parallel prefill rank runs its share of every
// prompt, with ring attention.
#include <fmt/format.h>

#include "core/builders/builders.hpp"
#include "core/builders/common.hpp"
#include "core/errors.hpp"

namespace perfsim {

using build::AttentionShape;
using build::GraphBuilder;
using build::LayerCache;
using build::ModelWeights;

namespace {

// Final norm and lm_head over `x` [rows, h]; rows = one per sequence. Under tensor
// parallelism each rank computes its vocabulary slice of the logits and they are all-gathered
// to pick the next token (Megatron and vLLM gather the logits).
void add_head(GraphBuilder& b, int x, const ModelWeights& mw, int64_t rows) {
  const int xf = b.norm("final_norm", x, mw.final_norm, rows, -1);
  const int logits = b.lm_head(xf, mw, rows);
  const build::RankShape& r = b.rank();
  if (r.tensor_parallel())
    (void)b.tp_collective("lm_head", Collective::all_gather, logits, {rows, r.vocab * r.tp}, -1,
                          Stage::forward);
}

// The stage's input: the embedded tokens on the first stage (all-reduced over the vocabulary
// slices, reduce-scattered with sp), the previous stage's output on the others.
int stage_input(GraphBuilder& b, const ModelWeights& mw, int64_t batch, int64_t seq,
                int64_t position) {
  const int64_t t = batch * seq;
  if (!b.rank().first_stage()) return b.pipeline_recv("pipeline.recv", b.rank().rows(t), Stage::forward);
  const int tokens = b.input("tokens", t);
  b.upload(tokens);
  return b.leave_tp("embedding", b.embed(tokens, mw, batch, seq, position), t, -1, Stage::forward);
}

// The stage's output `x` [R, h]: sent to the next stage, or (last stage) gathered from the
// sequence-parallel ranks for the head; returns -1 when sent.
int stage_output(GraphBuilder& b, int x, int64_t tokens) {
  if (!b.rank().last_stage()) {
    b.pipeline_send("pipeline.send", x, Stage::forward);
    return -1;
  }
  return b.enter_tp("layers.out", x, tokens, -1, Stage::forward);
}

// Each sequence's last row of x [batch*seq, h] -> [batch, h].
int slice_last(GraphBuilder& b, int x, int64_t batch, int64_t seq) {
  const int64_t h = b.model().hidden;
  const int y = b.tensor("slice_last_token.out", {batch, h}, TensorRole::activation);
  OpAttrs a;
  a.batch = batch;
  a.seq_q = seq;
  a.rows = batch * seq;
  a.cols = h;
  a.elements = batch * h;
  b.op(OpKind::slice_last_token, "slice_last_token", {x}, {y}, a, -1, Stage::forward);
  return y;
}

// A forward over `seq` new tokens per sequence at positions `position`.., attention over them
// (and, after cached tokens, over the cache too); with `cache_capacity` > 0 the fresh K/V are
// also appended to a cache of that capacity. The head runs over each sequence's last row, or
// over every row with `every_row` (a speculative verify pass checks each draft's logits).
Graph full_forward(const ModelConfig& m, const Workload& w, const BuildOptions& o, int64_t seq,
                   int64_t cache_capacity, int64_t position = 0, bool every_row = false) {
  GraphBuilder b(m, w, o);
  const ModelWeights mw = b.add_weights();
  // Context parallelism: the rank holds seq/cp tokens of every sequence and caches their K/V,
  // its share of the cache (the new tokens spread over the ranks as the prompt is).
  const build::RankShape& r = b.rank();
  if (r.context_parallel()) {
    seq = r.local_seq(seq);
    if (cache_capacity > 0) cache_capacity = (cache_capacity + r.cp - 1) / r.cp;
  }
  const int64_t batch = w.batch, t = batch * seq;
  int x = stage_input(b, mw, batch, seq, position);
  AttentionShape s;
  s.batch = batch;
  s.seq_q = seq;
  s.seq_kv = position + seq;
  s.kv_capacity = position > 0 ? cache_capacity : seq;
  s.position = position;
  for (int l = 0; l < static_cast<int>(b.layers_built()); ++l) {
    LayerCache cache;
    if (cache_capacity > 0) cache = b.add_cache(l, batch, cache_capacity, position > 0);
    x = b.forward_layer(l, x, mw.layers[static_cast<std::size_t>(l)], s, cache).out;
  }
  x = stage_output(b, x, t);
  // With context parallelism the graph is rank 0's, which holds the last chunk of every
  // sequence (rank.hpp) and so its last token: it runs the head.
  if (x >= 0) {
    if (every_row) add_head(b, x, mw, t);
    else add_head(b, slice_last(b, x, batch, seq), mw, batch);
  }
  return b.take();
}

}  // namespace

Graph build_prefill(const ModelConfig& m, const Workload& w, const BuildOptions& o) {
  build::check_positions(m, w.prompt, "prefill (prompt)");
  if (w.cached > 0 && o.parallel.cp > 1)
    throw ConfigError("a prefill after cached tokens (cached > 0) cannot be split over context-parallel ranks");
  Graph g = full_forward(m, w, o, w.prompt - w.cached, w.prompt + w.new_tokens, w.cached);
  g.check();
  return g;
}

Graph build_decode(const ModelConfig& m, const Workload& w, const BuildOptions& o) {
  const int64_t context = w.decode_context();
  build::check_positions(m, w.prompt + w.new_tokens, "decode (prompt + new_tokens)");
  if (!w.kv_cache) {
    // Without a cache every step recomputes the context and the new token from scratch.
    Graph g = full_forward(m, w, o, context + 1, 0);
    g.check();
    return g;
  }
  if (w.draft_tokens > 0) {
    // Speculative decoding's verify pass: the last accepted token and k drafts per sequence,
    // appended to the cache and attending it causally, with logits for every row (each draft
    // is checked against them). Rejected drafts' rows are later overwritten, not removed.
    if (o.parallel.cp > 1) throw ConfigError("a speculative verify pass cannot be split over context-parallel ranks");
    build::check_positions(m, w.prompt + w.new_tokens + w.draft_tokens, "decode (prompt + new_tokens + speculative)");
    Graph g = full_forward(m, w, o, w.draft_tokens + 1, w.prompt + w.new_tokens + w.draft_tokens, context, true);
    g.check();
    return g;
  }
  GraphBuilder b(m, w, o);
  const ModelWeights mw = b.add_weights();
  const int64_t batch = w.batch;
  int x = stage_input(b, mw, batch, 1, context);  // the step's new token per sequence
  AttentionShape s;
  s.batch = batch;
  s.seq_q = 1;
  s.seq_kv = context + 1;
  s.kv_capacity = w.prompt + w.new_tokens;
  s.position = context;
  for (int l = 0; l < static_cast<int>(b.layers_built()); ++l) {
    const LayerCache cache = b.add_cache(l, batch, s.kv_capacity, true);
    x = b.forward_layer(l, x, mw.layers[static_cast<std::size_t>(l)], s, cache).out;
  }
  x = stage_output(b, x, batch);
  if (x >= 0) add_head(b, x, mw, batch);
  Graph g = b.take();
  g.check();
  return g;
}

}  // namespace perfsim
