// A serving engine's step as one graph: the T tokens of S sequences packed into one forward
// (vLLM's flattened batch), each token at its own position, the layers' K/V rows written into
// a page pool every step shares and each sequence attending its own pages through a block
// table. Decodes, prompt chunks after cached tokens and whole prompts run side by side.
#include <fmt/format.h>

#include <algorithm>

#include "core/builders/builders.hpp"
#include "core/builders/common.hpp"
#include "core/errors.hpp"

namespace perfsim {

using build::GraphBuilder;
using build::LayerCache;
using build::ModelWeights;
using build::VarlenAttention;

namespace {

void check_step(const ModelConfig& m, const EngineStepShape& s, const BuildOptions& o) {
  if (!m.rope && !m.alibi)
    throw ConfigError(fmt::format("an executed serving engine runs models with rotary or ALiBi positions; '{}' "
                                  "learns its positions",
                                  m.name));
  // One engine over tp GPUs (a rank's share of the heads and the MLP); replicas (dp) are
  // engines of their own, not a layout inside one.
  if (o.parallel.pp > 1 || o.parallel.cp > 1 || o.parallel.ep > 1 || o.parallel.sp || o.parallel.zero > 0)
    throw ConfigError("an executed serving engine runs on one GPU or over tensor-parallel GPUs (tp): no pp, cp, "
                      "ep, sp or zero");
  if (o.parallel.tp > 1 && m.alibi)
    throw ConfigError("an executed tensor-parallel serving engine runs rotary models (ALiBi's head slopes are "
                      "not split over ranks)");
  if (s.q_len.empty() || s.q_len.size() != s.kv_len.size())
    throw std::invalid_argument("engine step: q_len and kv_len must name the same sequences, at least one");
  if (s.kv_block <= 0 || s.pool_blocks <= 0 || s.table_width <= 0)
    throw std::invalid_argument("engine step: empty page pool or block table");
  bool decodes = true;
  for (std::size_t i = 0; i < s.q_len.size(); ++i) {
    const int64_t q = s.q_len[i], kv = s.kv_len[i];
    if (q < 1 || kv < q || kv > s.kv_block * s.table_width || kv > m.max_seq)
      throw std::invalid_argument(fmt::format("engine step: sequence {} has {} new of {} keys", i, q, kv));
    // Decodes lead (decode_seqs counts them), as vLLM orders a step's running requests first.
    const bool decode = q == 1 && kv > 1;
    if (decode && !decodes) throw std::invalid_argument("engine step: decodes must come first");
    decodes = decodes && decode;
  }
  // A sequence samples its last row, a speculative verify every row it checks.
  int64_t rows = 0;
  for (int64_t q : s.q_len) rows += q;
  if (s.sampled < 0 || s.sampled > rows) throw std::invalid_argument("engine step: more sampling rows than rows");
}

}  // namespace

Graph build_engine_step(const ModelConfig& m, const EngineStepShape& s, const BuildOptions& o) {
  check_step(m, s, o);
  VarlenAttention v;
  v.seqs = static_cast<int64_t>(s.q_len.size());
  v.kv_block = s.kv_block;
  v.table_width = s.table_width;
  for (std::size_t i = 0; i < s.q_len.size(); ++i) {
    const int64_t q = s.q_len[i], kv = s.kv_len[i];
    v.tokens += q;
    v.max_q = std::max(v.max_q, q);
    v.max_kv = std::max(v.max_kv, kv);
    if (q == 1 && kv > 1 && v.decode_seqs == static_cast<int64_t>(i)) ++v.decode_seqs;
    // Query i of q sees kv − q + i + 1 keys: Σ = q·(kv − q) + q·(q + 1)/2.
    v.kv_pairs += static_cast<double>(q) * static_cast<double>(kv - q) + static_cast<double>(q) * (q + 1) / 2.0;
    v.kv_rows += kv;
  }
  Workload w;
  w.phase = Phase::decode;
  w.batch = v.seqs;
  w.prompt = std::max<int64_t>(1, v.max_kv - 1);
  w.new_tokens = 1;
  w.host_data = false;
  GraphBuilder b(m, w, o);
  const ModelWeights mw = b.add_weights();
  const int tokens = b.input(std::string(engine_input::tokens), v.tokens);
  v.positions = b.input(std::string(engine_input::positions), v.tokens);
  v.slots = b.input(std::string(engine_input::slots), v.tokens);
  v.table = b.tensor(std::string(engine_input::block_table), {v.seqs, v.table_width}, TensorRole::input, -1,
                     DType::int32);
  v.query_start = b.input(std::string(engine_input::query_start), v.seqs + 1);
  v.kv_len = b.input(std::string(engine_input::kv_len), v.seqs);
  // Under tensor parallelism each rank embeds its vocabulary slice, all-reduced into the rows.
  int x = b.leave_tp("embedding", b.embed(tokens, mw, 1, v.tokens, 0), v.tokens, -1, Stage::forward);

  build::AttentionShape as;
  as.batch = 1;
  as.seq_q = v.tokens;
  as.seq_kv = v.max_kv;
  as.kv_capacity = v.kv_block * v.table_width;
  as.varlen = &v;
  const std::vector<int64_t> page_shape{s.pool_blocks, s.kv_block, b.rank().kv_heads, m.head_dim()};
  for (int l = 0; l < static_cast<int>(b.layers_built()); ++l) {
    LayerCache pages;
    pages.k = b.tensor(b.lname(l, "attn.k_pages"), page_shape, TensorRole::kv_cache, l);
    pages.v = b.tensor(b.lname(l, "attn.v_pages"), page_shape, TensorRole::kv_cache, l);
    pages.capacity = as.kv_capacity;
    pages.attend = true;
    x = b.forward_layer(l, x, mw.layers[static_cast<std::size_t>(l)], as, pages).out;
  }
  // The head runs on the rows that sample (a prompt chunk that does not end its prompt does
  // not), as vLLM computes logits only for them.
  if (s.sampled > 0) {
    const int64_t h = m.hidden;
    const int rows = b.input(std::string(engine_input::sample_rows), s.sampled);
    const int kept = b.tensor("slice_last_token.out", {s.sampled, h}, TensorRole::activation);
    OpAttrs a;
    a.rows = v.tokens;
    a.cols = h;
    a.batch = s.sampled;
    a.elements = s.sampled * h;
    b.op(OpKind::varlen_slice_last_token, "slice_last_token", {x, rows}, {kept}, a, -1, Stage::forward);
    const int xf = b.norm("final_norm", kept, mw.final_norm, s.sampled, -1);
    const int logits = b.lm_head(xf, mw, s.sampled);
    // Each rank's vocabulary slice of the logits, gathered to sample from.
    const build::RankShape& r = b.rank();
    if (r.tensor_parallel())
      (void)b.tp_collective("lm_head", Collective::all_gather, logits, {s.sampled, r.vocab * r.tp}, -1,
                            Stage::forward);
  }
  Graph g = b.take();
  g.check();
  return g;
}

}  // namespace perfsim
