// Shared pieces of the graph builders: a helper that adds named tensors and ops with the
// right counts, the model's weights, and one transformer layer's forward pass, all for one
// rank's share of the model (rank.hpp), with the collectives tensor, pipeline and context
// parallelism add (tensor_parallel.cpp, pipeline.cpp, context_parallel.cpp). The inference and training builders
// (inference.cpp, train.cpp) assemble these.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/builders/builders.hpp"
#include "core/builders/rank.hpp"
#include "core/graph/graph.hpp"
#include "core/config/model.hpp"
#include "core/config/workload.hpp"

namespace perfsim::build {

struct NormWeights {
  int gamma = -1;
  int beta = -1;  // layernorm only
};

// Shapes are the rank's: under tensor parallelism q_dim, kv_dim, F and V are its shares
// (RankShape), the norms are whole.
struct LayerWeights {
  NormWeights attn_norm, mlp_norm;
  int q = -1, k = -1, v = -1, o = -1;  // [h, q_dim], [h, kv_dim], [h, kv_dim], [q_dim, h]
  int gate = -1;  // swiglu gate_proj [h, F] or gelu fc1 [h, F]
  int up = -1;    // swiglu up_proj [h, F]; -1 for gelu
  int down = -1;  // swiglu down_proj [F, h] or gelu fc2 [F, h]
  // Mixture of experts (RankShape: E experts of the model, El on this rank, Fe each expert's
  // width on it): the router [h, E] and the rank's experts stacked, gate/fc1 [El, h, Fe], up
  // [El, h, Fe] (swiglu), down/fc2 [El, Fe, h]. gate/up/down above are then the shared experts
  // as one MLP of their combined width (-1 without shared experts).
  int router = -1;
  int expert_gate = -1, expert_up = -1, expert_down = -1;
};

struct ModelWeights {
  int embedding = -1;   // [V, h]; on the first pipeline stage, and on the last when tied
  int positions = -1;   // [max_seq, h], learned positions only (first stage)
  NormWeights final_norm;  // last stage only
  int lm_head = -1;     // [h, V]; -1 when tied (lm_head reads `embedding` transposed)
  std::vector<LayerWeights> layers;
};

// A serving engine's packed step (the varlen kinds, engine_step.cpp): its int32 metadata
// tensors and what the attention's attributes say of them.
struct VarlenAttention {
  int positions = -1, slots = -1, table = -1, query_start = -1, kv_len = -1;
  int64_t seqs = 0, tokens = 0;  // S sequences, T tokens
  int64_t max_q = 0, max_kv = 0; // the longest query run and KV length
  int64_t decode_seqs = 0;       // leading sequences with one query
  int64_t kv_block = 0, table_width = 0;
  double kv_pairs = 0;           // Σ over queries of the keys each sees
  int64_t kv_rows = 0;           // Σ kv_len
};

// Where one layer's attention gets its keys and values.
struct AttentionShape {
  int64_t batch = 1;
  int64_t seq_q = 1;        // new tokens per sequence in this forward
  int64_t seq_kv = 1;       // keys attended per sequence
  int64_t kv_capacity = 1;  // rows allocated per sequence in the K/V the attention reads
  int64_t position = 0;     // absolute position of the first new token
  // Set for a packed step: batch = 1 and seq_q = T for the dense ops; rope, the KV appends and
  // the attention are their varlen kinds, which read the metadata instead.
  const VarlenAttention* varlen = nullptr;
};

// A layer's KV cache: [batch, capacity, kv_heads, head_dim] each.
struct LayerCache {
  int k = -1, v = -1;
  int64_t capacity = 0;
  bool attend = false;  // attention reads the cache (decode) rather than the fresh K/V (prefill)
};

// Every tensor one layer's forward produces; the training builder reads them in backward.
// R is the rows outside the tensor-parallel GEMMs: T, or T/tp with sequence parallelism.
struct LayerActivations {
  int x = -1;                  // layer input [R, h]
  int xn1 = -1;                // attention norm output [R, h]
  int qkv_in = -1;             // what the QKV projections read [T, h]: xn1, all-gathered with sp
  int q = -1, k = -1, v = -1;  // projections [T, q_dim], [T, kv_dim], [T, kv_dim]
  int q_att = -1, k_att = -1;  // what attention reads: rotated (rope) or the projections
  int k_src = -1, v_src = -1;  // K/V the attention reads (fresh or the cache)
  int scores = -1, probs = -1; // [B, H, seq_q, seq_kv]
  int context = -1;            // [T, q_dim]
  int attn_out = -1;           // o_proj output [R, h] (all-reduced or reduce-scattered)
  int x1 = -1;                 // x + attention [R, h]
  int xn2 = -1;                // MLP norm output [R, h]
  int mlp_in = -1;             // what the MLP's first GEMMs read [T, h]: xn2, gathered with sp
  int gate = -1, up = -1;      // [T, F]: swiglu gate/up or gelu fc1 output (gate)
  int act = -1;                // [T, F]: silu(gate)·up or gelu(fc1)
  // Mixture of experts: the router's logits [T, E], the routing (weights fp32, experts and
  // slots int32, [T, k]), the dispatched buffers [E, C, h] and, under expert parallelism, the
  // rank's experts' buffers after the all-to-all [El, ep·C, h]; the experts' gate/up/act
  // [El, ep·C, Fe] and outputs [El, ep·C, h], those sent back [E, C, h], the combined [T, h].
  // gate/up/act above are the shared experts' then.
  struct Experts {
    int logits = -1, weights = -1, choice = -1, slots = -1;
    int dispatched = -1, input = -1;
    int gate = -1, up = -1, act = -1;
    int output = -1, returned = -1, combined = -1;
    int64_t capacity = 0;  // C
    double useful = 1;     // the share of buffer rows real tokens fill: T·k / (E·C), at most 1
  };
  Experts moe;
  int mlp_out = -1;            // [R, h]
  int out = -1;                // x1 + mlp [R, h]
  // Context parallelism: the K/V block each step of the ring attention read (block 0 the rank's
  // own, block j the one received after j steps), and the log-sum-exp [B, H, seq_q] fp32 of the
  // merged output (a.context), which every block's backward reads; scores and probs stay -1.
  struct RingBlock {
    int k = -1, v = -1;
  };
  std::vector<RingBlock> ring;
  int ring_lse = -1;
};

class GraphBuilder {
 public:
  GraphBuilder(const ModelConfig& m, const Workload& w, const BuildOptions& o);

  [[nodiscard]] Graph& graph() { return m_graph; }
  [[nodiscard]] Graph take() { return std::move(m_graph); }
  [[nodiscard]] const ModelConfig& model() const { return m_model; }
  [[nodiscard]] const RankShape& rank() const { return m_rank; }
  // layer_name() with the model's index of the stage's layer `layer` (a graph's layers are
  // numbered from 0 in Op::layer; names say which layers of the model they are).
  [[nodiscard]] std::string lname(int layer, const std::string& what) const;
  [[nodiscard]] int64_t layers_built() const { return m_graph.layers_built; }
  [[nodiscard]] double layer_scale() const { return m_graph.layer_scale(); }

  // Forward and backward op counts are multiplied by this (grad_accum micro-batches).
  void set_pass_multiplier(double v) { m_pass_multiplier = v; }
  // Ops made from now on belong to model chunk `c` (Op::chunk) of an interleaved stage.
  void set_chunk(int c) { m_chunk = c; }
  // The graph's layers (0 .. layers_built) of chunk `c`: [begin, end).
  [[nodiscard]] std::pair<int, int> chunk_layers(int c) const {
    return {m_chunk_begin[static_cast<std::size_t>(c)], m_chunk_begin[static_cast<std::size_t>(c) + 1]};
  }

  // Persistent per-layer tensors (layer >= 0) count L/built; everything else counts 1.
  int tensor(std::string name, std::vector<int64_t> shape, TensorRole role, int layer = -1,
             DType dtype = DType::fp32);
  // A device input (token ids, targets: int32) of `elements` values.
  int input(std::string name, int64_t elements);
  // With Workload::host_data: adds `<name>.host` (pageable host memory, role input) and the
  // op "upload.<name>" copying it into the device input `dst`; call it right before the first
  // op that reads `dst`. Without host data it adds nothing.
  void upload(int dst);
  // Activation of the same shape and dtype as `like`.
  int activation_like(std::string name, int like);
  int op(OpKind kind, std::string name, std::vector<int> inputs, std::vector<int> outputs,
         const OpAttrs& attrs, int layer, Stage stage);

  // Parameters in creation order, with the layer they belong to (-1 outside layers).
  struct Param {
    int weight;
    int layer;
  };
  [[nodiscard]] const std::vector<Param>& params() const { return m_params; }

  [[nodiscard]] ModelWeights add_weights();
  // C[m, n] = X[m, k] · W[k, n]: a linear layer with weights stored [in, out].
  int linear(const std::string& name, int x, int w, int64_t m, int64_t n, int64_t k, int layer);
  int norm(const std::string& name, int x, const NormWeights& nw, int64_t rows, int layer,
           Stage stage = Stage::forward);
  // Token (+ learned position) embedding of `tokens` [batch*seq_q] into [batch*seq_q, h].
  int embed(int tokens, const ModelWeights& mw, int64_t batch, int64_t seq_q, int64_t position);
  // lm_head over `x` [rows, h] -> logits [rows, V] (the rank's vocabulary share).
  int lm_head(int x, const ModelWeights& mw, int64_t rows);

  // Tensor parallelism (tensor_parallel.cpp; none of these add anything on one rank). Ops are
  // named `name`.<collective> and write `name`.<collective>.out.
  // A collective over the tensor-parallel group on the main stream, writing a new tensor.
  int tp_collective(const std::string& name, Collective c, int x, std::vector<int64_t> out_shape,
                    int layer, Stage stage);
  // Into a column-parallel GEMM: x [R, h] -> [T, h]; all-gathers the sequence with sp, else x.
  int enter_tp(const std::string& name, int x, int64_t tokens, int layer, Stage stage);
  // Out of a row-parallel GEMM (or a column-parallel dgrad): the partial sums [T, h] -> [R, h],
  // all-reduced, or reduce-scattered over the sequence with sp.
  int leave_tp(const std::string& name, int partial, int64_t tokens, int layer, Stage stage);
  // The [T, h] input a column-parallel GEMM's weight gradient reads: with sp the saved [R, h]
  // norm output all-gathered again in backward (Megatron keeps only the local part), else x.
  int regather(const std::string& name, int x, int64_t tokens, int layer);

  // Pipeline parallelism (pipeline.cpp): a send_recv over the pipeline pair on its own stream.
  // The receive writes a new [rows, h] activation; the send reads x and writes nothing.
  int pipeline_recv(const std::string& name, int64_t rows, Stage stage);
  void pipeline_send(const std::string& name, int x, Stage stage);
  // Context parallelism (context_parallel.cpp): ring attention over the cp ranks, the local
  // queries against each rank's K/V block in turn while the blocks pass around the ring on the
  // context stream, each block a flash attention whose output is merged into the running one.
  // Forward: writes a.context, a.ring_lse and a.ring from a.q_att, a.k_src and a.v_src.
  void ring_attention(int layer, LayerActivations& a, const AttentionShape& s);
  // Backward from the context's gradient: the K/V blocks pass around again, each block's
  // backward reading the merged output and LSE; the dK/dV of a received block travel on around
  // the ring with it, each rank adding its own, and arrive back at the block's rank. Returns dQ,
  // dK, dV of the rank's own (rotated) Q and K and V.
  struct RingGrads {
    int dq = -1, dk = -1, dv = -1;
  };
  [[nodiscard]] RingGrads ring_attention_bwd(int layer, const LayerActivations& a, int dcontext,
                                             const AttentionShape& s);
  // A packed step's attention (forward_layer with AttentionShape::varlen): the layer's K/V
  // rows appended into `pages` through the slots, then one varlen paged flash attention over
  // every sequence, writing a.context.
  void varlen_attention(int layer, LayerActivations& a, const VarlenAttention& v, const LayerCache& pages);
  // Mixture of experts (moe.cpp): the MoE MLP of layer `l` over `t` tokens read from
  // a.mlp_in; fills a.moe (and the shared experts' a.gate/up/act) and returns the partial
  // output [T, h] that leave_tp sums over the tensor-parallel ranks.
  int moe_forward(int l, LayerActivations& a, const LayerWeights& lw, int64_t t);
  // An expert-parallel all-to-all on the main stream: each rank's [E, C, h] buffers out to the
  // ranks holding those experts, [El, ep·C, h] in (or back, `out_shape` saying which): the
  // blocks core/graph/all_to_all.hpp lays out.
  int ep_all_to_all(const std::string& name, int x, std::vector<int64_t> out_shape, int layer, Stage stage);
  // The experts' batched linear: Y[El, rows, n] = X[El, rows, k] · W[El, k, n].
  // `useful`: Experts::useful, the share of its FLOPs MFU counts.
  int expert_linear(const std::string& name, int x, int w, int64_t rows, int64_t n, int64_t k, int layer,
                    double useful);
  // The dense MLP of width f over x [t, h] (gate/up/act into a); returns the down
  // projection's partial output [t, h].
  // `prefix`: "mlp", or "mlp.shared" for an MoE layer's shared experts.
  int dense_mlp(int l, LayerActivations& a, const LayerWeights& lw, int x, int64_t t, int64_t f,
                const std::string& prefix = "mlp");
  [[nodiscard]] OpAttrs moe_attrs(int64_t tokens, int64_t cols, int64_t capacity) const;
  [[nodiscard]] LayerActivations forward_layer(int layer, int x, const LayerWeights& lw,
                                               const AttentionShape& a, const LayerCache& cache);
  [[nodiscard]] LayerCache add_cache(int layer, int64_t batch, int64_t capacity, bool attend);

  // The attention attributes shared by the scores/softmax/context ops of one layer.
  [[nodiscard]] OpAttrs attention_attrs(const AttentionShape& a) const;
  // The same for attn_softmax / attn_softmax_bwd, which read no K/V (kv_capacity 0).
  [[nodiscard]] OpAttrs softmax_attrs(const AttentionShape& a) const;
  [[nodiscard]] OpAttrs rope_attrs(const AttentionShape& a, int64_t heads) const;

 private:
  NormWeights add_norm_weights(const std::string& prefix, int layer);
  // One step of the context-parallel ring: sends x and y to the next rank and receives blocks of
  // the same shapes, named `xname` and `yname`, from the previous one.
  std::pair<int, int> ring_step(const std::string& name, int x, int y, const std::string& xname,
                                const std::string& yname, int layer, Stage stage);
  int add_blocks(const std::string& name, int a, int b, int layer, Stage stage);
  // The flash attention of ring step `step` (0: the rank's own block): {O, LSE}.
  std::pair<int, int> ring_block(int layer, int step, int q, int k, int v, const AttentionShape& s);
  int param(std::string name, std::vector<int64_t> shape, int layer, bool expert = false);
  // A tensor-parallel parameter: marks it as this rank's part along `dim` of the whole the tp
  // ranks split (Tensor::shard), so an executor gives each rank its slice of the whole's values.
  int tp_param(std::string name, std::vector<int64_t> shape, int dim, int layer);
  void add_mlp_weights(int l, LayerWeights& lw, int64_t width, const std::string& prefix = "mlp");
  void add_expert_weights(int l, LayerWeights& lw);
  // A routed expert's weight [El, ...]: marks it as this rank's experts (dim 0, over the ep
  // ranks) and its part of each one's width (`width_dim`, over the tp ranks) of the whole.
  int expert_param(std::string name, std::vector<int64_t> shape, int width_dim, int layer);

  const ModelConfig& m_model;
  RankShape m_rank;
  Graph m_graph;
  double m_pass_multiplier = 1;
  int m_chunk = 0;
  // Where each chunk's layers begin among the graph's (a last entry: layers_built). Sampled
  // layers (BuildOptions::layers) spread evenly over the chunks.
  std::vector<int> m_chunk_begin;
  std::vector<Param> m_params;
};

// "layer3.attn.q_proj" for layer >= 0, the bare name otherwise.
[[nodiscard]] std::string layer_name(int layer, const std::string& what);

// Throws ConfigError when learned positions cannot cover `positions` tokens.
void check_positions(const ModelConfig& m, int64_t positions, const char* what);

}  // namespace perfsim::build
