// Graph builders for a decoder-only transformer: prefill, one decode step, one training step.
// They build the fp32 baseline; optimizations are applied afterwards as passes (core/passes/passes.hpp).
#pragma once
#include <cstdint>
#include <vector>

#include "core/graph/graph.hpp"
#include "core/config/model.hpp"
#include "core/config/parallel.hpp"
#include "core/config/workload.hpp"

namespace perfsim {

struct BuildOptions {
  // Transformer layers to materialize; the rest are represented through op/tensor counts.
  // 0 = all layers.
  int64_t layers = 0;
  // The rank to build, under `parallel` (a single GPU by default): tensor parallelism (tp,
  // sp) splits every layer's weights, heads and MLP width and adds its collectives; pipeline
  // parallelism (pp) keeps the layers of pipeline stage `stage` only (the embedding on the
  // first stage, the final norm, head and loss on the last), with send/recv of activations and
  // their gradients at the stage's edges; context parallelism (cp) keeps seq/cp tokens of every
  // sequence (train and prefill) with ring attention over the cp ranks (context_parallel.cpp).
  // Expert parallelism (ep) keeps experts/ep of a mixture-of-experts model's experts, with the
  // all-to-alls of the tokens routed to the others (moe.cpp). Data parallelism and ZeRO are
  // applied after the passes (core/parallel/data_parallel.hpp).
  ParallelSpec parallel;
  int stage = 0;  // pipeline stage, 0 .. parallel.pp - 1

  // A single GPU's graph with `layers` materialized.
  [[nodiscard]] static BuildOptions sampled(int64_t layers) {
    BuildOptions o;
    o.layers = layers;
    return o;
  }
};

// Dispatches on w.phase (and w.kv_cache for decode).
[[nodiscard]] Graph build_graph(const ModelConfig& m, const Workload& w, const BuildOptions& o = {});

// Forward over the prompt, writing the KV cache; logits for the last token only.
[[nodiscard]] Graph build_prefill(const ModelConfig& m, const Workload& w, const BuildOptions& o = {});
// One step at context w.decode_context(): one new token per sequence, attention over the cache.
// With w.kv_cache == false the whole context is recomputed (a forward over context+1 tokens).
[[nodiscard]] Graph build_decode(const ModelConfig& m, const Workload& w, const BuildOptions& o = {});
// A serving engine's step (engine_step.cpp): T tokens of S sequences packed into one forward
// over a KV page pool every step shares. Sequences in order, decodes (one new token after
// cached ones) first; each computes q_len[i] new tokens and holds kv_len[i] keys after them.
// The metadata the step reads are int32 inputs named in engine_input, filled by whoever runs
// the step: token ids [T], positions [T], page slots [T] (page·kv_block + row, where each new
// K/V row goes), the block table [S, table_width], query starts [S + 1], KV lengths [S], and
// the rows that sample [sampled] (the head runs on those only: a sequence's last row, or every
// row of a speculative verify). The pages are each layer's
// "layerN.attn.k_pages" / "v_pages" [pool_blocks, kv_block, kv_heads, head_dim]. Rotary or
// ALiBi models (ALiBi reads no positions) on one GPU; the graph is fp32 until precision passes
// run.
struct EngineStepShape {
  std::vector<int64_t> q_len, kv_len;
  int64_t sampled = 0;
  int64_t pool_blocks = 0, kv_block = 16, table_width = 0;
};
namespace engine_input {
inline constexpr const char* tokens = "engine.tokens";
inline constexpr const char* positions = "engine.positions";
inline constexpr const char* slots = "engine.slots";
inline constexpr const char* block_table = "engine.block_table";
inline constexpr const char* query_start = "engine.query_start";
inline constexpr const char* kv_len = "engine.kv_len";
inline constexpr const char* sample_rows = "engine.sample_rows";
}  // namespace engine_input
[[nodiscard]] Graph build_engine_step(const ModelConfig& m, const EngineStepShape& s, const BuildOptions& o = {});

// Forward, backward and AdamW for one optimizer step (grad_accum micro-batches are
// represented by counts on the forward/backward ops).
[[nodiscard]] Graph build_train(const ModelConfig& m, const Workload& w, const BuildOptions& o = {});

}  // namespace perfsim
