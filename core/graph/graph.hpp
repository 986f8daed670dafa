// The workload graph: tensors, and ops in execution order that read and write them.
// One graph goes to both the cost model and a backend, so predictions and
// measurements always describe the same operators.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/graph/op_kind.hpp"
#include "core/config/dtype.hpp"
#include "core/config/workload.hpp"

namespace perfsim {

// What a tensor is for; memory reports group bytes by role.
enum class TensorRole {
  weight,          // model parameters in compute precision
  master_weight,   // fp32 copy of parameters kept by mixed precision
  gradient,        // parameter gradients
  optimizer_state, // AdamW m and v
  kv_cache,        // cached keys and values
  input,           // token ids, targets
  activation,      // produced and consumed by ops; freed after its last reader
  workspace,       // not a tensor role: kernel and library workspaces (core/cost/workspace.hpp),
                   // the bucket memory breakdowns report them under
};

inline constexpr TensorRole all_tensor_roles[] = {
    TensorRole::weight, TensorRole::master_weight, TensorRole::gradient,
    TensorRole::optimizer_state, TensorRole::kv_cache, TensorRole::input,
    TensorRole::activation, TensorRole::workspace};

[[nodiscard]] const char* name_of(TensorRole r);

// Where a tensor's bytes live. Host tensors are not device memory: the memory model and the
// backends' device peaks leave them out, and `copy` ops move them to or from the device.
// Pageable memory is what malloc returns (the driver stages each copy through a pinned
// buffer, and the copy blocks the host); pinned memory is page-locked (DMA straight from it,
// asynchronous to the host).
enum class Residence { device, host_pageable, host_pinned };
[[nodiscard]] const char* name_of(Residence r);
// Persistent tensors live for the whole step; activations live from producer to last reader.
[[nodiscard]] bool is_persistent(TensorRole r);

// One rank's part of a tensor the ranks of a group each hold a part of (parallel plans): part
// `place` of `parts` of the whole tensor named `of`, whose shape is `whole`, cut along dimension
// `dim` (which `parts` divides), or with dim = −1 cut from the whole flattened into parts of
// ceil(elements / parts), the last one padded. `place` is the rank's place in its group of
// `parts` ranks `stride` apart (RankGroup in core/run/communicator.hpp): executors use it to give
// each rank its part of the whole's data, so a sharded step computes what the unsharded one does.
// A pipeline's micro-batches cut the rank's part once more: micro-batch `micro` of `micros` is
// part place · micros + micro of parts · micros. A tensor may be cut by several groups in turn
// (Tensor::shard): a routed expert's weight is its rank's experts of the whole, then its part
// of each expert's width; a ZeRO shard of it a flat part of that. Context parallelism cuts
// each sequence into 2·parts chunks for causal load balance (`balanced`): the part of place p is
// chunks p and 2·parts − 1 − p along `dim`, in that order (core/builders/rank.hpp, context_chunks).
struct Shard {
  std::string of;
  std::vector<int64_t> whole;
  int dim = -1;
  int parts = 1;
  int stride = 1;
  int micro = 0;
  int micros = 1;
  bool balanced = false;
};

// Runs of a shard's elements in its whole: fn(local offset, whole offset, count) for each
// contiguous run, in order, covering the part's elements that lie inside the whole (a padded
// tail is left out). An unsharded tensor is one run of all its elements.
void for_each_whole_run(const std::vector<int64_t>& shape, const Shard* shard, int place,
                        const std::function<void(int64_t local, int64_t whole, int64_t count)>& fn);

struct Tensor {
  int id = -1;
  std::string name;            // "layer0.attn.q", "lm_head.weight"
  std::vector<int64_t> shape;  // row-major
  DType dtype = DType::fp32;
  TensorRole role = TensorRole::activation;
  // How many real tensors this one stands for: L/built for per-layer tensors whose
  // lifetime spans layers (weights, saved activations), 1 otherwise.
  double count = 1;
  Residence residence = Residence::device;
  // Lives from the op that writes it to its last reader although its role is a persistent one:
  // the full-size weights a sharded rank gathers before use, the full gradients it scatters
  // after (parallel plans). Its bytes are still reported under its role.
  bool transient = false;
  // Belongs to the routed experts of a mixture-of-experts layer (weights, their gradients and
  // optimizer state): under expert parallelism only the ranks holding the same experts share it.
  bool expert = false;
  // Set when the tensor is one rank's part of a larger one (see Shard); empty otherwise. Several
  // when parts are cut from parts: outermost first, each one's `whole` the part the one before
  // leaves (its `of` names the outermost whole's tensor too).
  std::vector<Shard> shard;
  // A quantized weight (int8 or int4, quantize_weights): one bf16 scale per `quant_group`
  // elements (a group of an output channel's inputs, or the whole channel), and with
  // `quant_zeros` a bf16 zero point beside each (asymmetric int4, as AWQ and GPTQ store them).
  // Its bytes() hold them. 0: not quantized.
  int64_t quant_group = 0;
  bool quant_zeros = false;
  // 2:4 structured sparsity (sparse_24): two of every four values kept, each with a 2-bit index
  // (NVIDIA's compressed layout): half the values and an eighth of a byte per weight.
  bool sparse_24 = false;

  // Throws ConfigError naming the tensor when the count overflows int64.
  [[nodiscard]] int64_t elements() const;
  [[nodiscard]] bool on_host() const { return residence != Residence::device; }
  [[nodiscard]] double bytes() const {
    const auto n = static_cast<double>(elements());
    if (sparse_24) return n / 2 * bytes_of(dtype) + n / 8 + quant_bytes(n / 2);
    return n * bytes_of(dtype) + quant_bytes(n);
  }
  // The scales' (and zero points') bytes of `n` quantized elements.
  [[nodiscard]] double quant_bytes(double n) const {
    if (quant_group <= 0) return 0;
    return std::ceil(n / static_cast<double>(quant_group)) * 2.0 * (quant_zeros ? 2 : 1);
  }
};

// Whether a tensor lives for the whole step: its role's rule, unless it is transient.
[[nodiscard]] bool is_persistent(const Tensor& t);

// Global rank `rank`'s place in the group that cuts shard `s`: (rank / stride) mod parts.
[[nodiscard]] int place_of(const Shard& s, int rank);
// Runs of tensor t's elements in the outermost whole of its shards (t.shard, every level cutting
// the part the one before leaves) as global rank `rank` holds them: fn(local offset, whole
// offset, count), in order of the local offset; a padded tail is left out.
void for_each_whole_run(const Tensor& t, int rank,
                        const std::function<void(int64_t local, int64_t whole, int64_t count)>& fn);

// Shape attributes. Which fields matter depends on the op kind (see op_kind.hpp).
// A convolution's or a pooling window's geometry (NHWC): the input [batch, height, width,
// channels], windows of kernel_h × kernel_w taps `dilation` apart, moved by `stride`, over an
// input padded by `pad` on every side; conv2d's filters [filters, kernel_h, kernel_w, channels /
// groups] give the output [batch, out_h, out_w, filters]; a pool keeps its channels (filters =
// channels).
struct ConvGeometry {
  int64_t height = 0, width = 0, channels = 0, filters = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride = 1, pad = 0, dilation = 1, groups = 1;
  [[nodiscard]] int64_t out_h() const { return (height + 2 * pad - dilation * (kernel_h - 1) - 1) / stride + 1; }
  [[nodiscard]] int64_t out_w() const { return (width + 2 * pad - dilation * (kernel_w - 1) - 1) / stride + 1; }
  bool operator==(const ConvGeometry&) const = default;
};

struct OpAttrs {
  // gemm: C[m,n] = op(A)[m,k]·op(B)[k,n]; trans_a: A stored [k,m]; trans_b: B stored [n,k].
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;               // batched gemm count / attention batch
  bool trans_a = false, trans_b = false;
  bool accumulate = false;         // C += (gradient accumulation)
  // attention: Q [batch, seq_q, heads, head_dim]; K,V [batch, kv_capacity, kv_heads, head_dim]
  // of which the first seq_kv rows are used. Scores [batch, heads, seq_q, seq_kv].
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  int64_t seq_q = 0, seq_kv = 0, kv_capacity = 0;
  bool causal = false;             // query i (at position seq_kv - seq_q + i) sees kv <= its position
  // ALiBi (core/graph/alibi.hpp): the model's query heads, whose slopes bias the scores (the
  // softmax adds them to S; flash attention to its tiles); 0: no bias.
  int64_t alibi_heads = 0;
  // The rows per page of a paged KV cache: > 0 for the kinds that read one (reads_kv_pages:
  // paged_flash_attention and paged_kv_append, made by the paged_kv pass, and the varlen
  // attention and append), 0 for every other kind. The cache is then pages [num_blocks,
  // kv_block, kv_heads, head_dim] read through a block table [batch, max_blocks] int32 (or the
  // varlen append's slots), and kv_capacity = max_blocks·kv_block.
  int64_t kv_block = 0;
  // An fp8 KV cache (the fp8_kv pass: cache tensors of dtype fp8, OCP e4m3): the appends store
  // round(x / kv_scale) saturated to ±448, attention reads stored · kv_scale. One scale per
  // tensor; 1 where a checkpoint brings none (vLLM's default).
  double kv_scale = 1;
  bool kv_fp8 = false;  // the op reads or writes an fp8 KV cache (its kernels differ: own curves)
  bool sparse_24 = false;  // a GEMM on a 2:4 sparse weight (sparse_24): the sparse tensor cores' rate
  // A GEMM on a quantized weight (int8_weights, int4_weights, w8a8): its bits (8 or 4; 0 for a
  // float weight). Its kernels are others than a float GEMM's: curves of their own.
  int weight_bits = 0;
  // The varlen kinds (a serving engine's packed step, core/builders/engine_step.cpp): T = rows
  // tokens of batch = S sequences in one tensor; seq_q, seq_kv: the longest query run and KV
  // length. varlen_flash_attention: query–key pairs scored over all sequences and heads' one
  // head (Σ over queries of the keys each sees), for FLOPs; and how many leading sequences have
  // a single query (decodes), which kernels may treat apart. Its `cols` is the key rows read per
  // KV head, Σ_s kv_len[s], for bytes (K and V: 2·cols·kv_heads·head_dim elements).
  double kv_pairs = 0;
  int64_t decode_seqs = 0;
  // conv2d, conv2d_dgrad, conv2d_wgrad, maxpool(_bwd), avgpool(_bwd); with `batch`.
  ConvGeometry conv;
  bool conv_relu = false;          // conv2d: max(·, 0) after the bias (a folded conv+BN+ReLU)
  // norms, softmax, cross-entropy, batchnorm (rows = batch·height·width, cols = channels):
  // [rows, cols]; pointwise: elements
  int64_t rows = 0, cols = 0;
  int64_t elements = 0;
  double eps = 1e-5;
  int64_t position = 0;            // rope / kv_append: position of the first row
  // Context parallelism: rope, embedding and ring attention's flash_attention(_bwd) ops of a
  // rank of `cp` ranks `cp_stride` apart, whose place c in that group the executor reads from
  // its rank. Each sequence's seq_q rows are two chunks, chunks c and 2·cp − 1 − c of the whole
  // sequence's 2·cp (core/builders/rank.hpp, context_positions). `ring_step` k > 0 makes a flash op
  // the ring's block k: the local queries against the K/V of place (c − k) mod cp, of which only
  // half meets them (ring_block_rows); k = 0 is the rank's own block, causal.
  int cp = 1, cp_stride = 1, ring_step = 0;
  // adamw
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.95, weight_decay = 0.1;
  int passes = 1;                  // memory passes an (unfused) op makes over its data
  // cross_entropy: its gradient is that of the mean over this many rows (0: `rows`); the
  // micro-batches of one optimizer step share one mean, rows × micro-batches.
  int64_t loss_rows = 0;
  // moe_*: E experts (`experts`), each token routed to `top_k`, `capacity` rows per expert
  // buffer; rows = tokens T, cols = hidden h (dispatch, combine) or E (route)
  int64_t experts = 0, top_k = 0, capacity = 0;
  // moe_combine_bwd scales the gradient it writes into the experts' buffers by this, and
  // moe_dispatch_bwd divides the one it reads out of them by it. Under expert parallelism it is
  // 1/ep: an expert's weight gradient sums the tokens of ep ranks, each rank's loss the mean of
  // its own tokens, so unscaled it would be ep times a data-parallel rank's share (Megatron-Core
  // scales expert gradients alike); the tokens' own gradients come back unscaled.
  double expert_grad_scale = 1;
  // The share of the op's FLOPs that are the model's (MFU counts only those): an expert GEMM
  // over capacity-padded buffers does tokens·top_k / (experts·capacity) useful work.
  double model_share = 1;
  // collective
  Collective collective = Collective::all_reduce;
  int group = 1;
  // Distance between consecutive ranks of the group in the global rank order (tensor-parallel
  // ranks are adjacent: 1; a data-parallel group of tp=8 ranks: 8). With the hardware's GPUs per
  // node it says how many of the group share a node, so whether the collective crosses nodes
  // and over how many NICs (core/cost/roofline.cpp).
  int group_stride = 1;
  // all_reduce, reduce_scatter: the sum divided by the group's size (gradients averaged over
  // data-parallel ranks); otherwise the sum (tensor-parallel partial results).
  bool average = false;
  // Bytes of the whole buffer the collective reduces or gathers (nccl-tests' size): a bucket
  // of several tensors, the full tensor behind the shards it reads or writes. 0: the largest
  // tensor it reads or writes.
  double payload_bytes = 0;
  // host
  double host_seconds = 0;
  // add_rmsnorm / add_layernorm: names of the ops the fusion pass merged into this one
  std::vector<std::string> fused;
};

enum class Stage { forward, backward, optimizer, other };
[[nodiscard]] const char* name_of(Stage s);

struct Op {
  int id = -1;
  std::string name;          // "layer0.attn.q_proj"
  OpKind kind = OpKind::gemm;
  DType dtype = DType::fp32; // the precision the op computes in
  std::vector<int> inputs;   // tensor ids read
  std::vector<int> outputs;  // tensor ids written
  OpAttrs attrs;
  Stage stage = Stage::forward;
  int layer = -1;            // transformer layer, -1 outside layers
  int chunk = 0;             // model chunk of an interleaved pipeline stage (0 otherwise)
  double count = 1;          // how many real ops this one stands for (layer sampling)
  bool recomputed = false;   // inserted by the recompute pass
  // 0: the main stream, where ops run in program order. A side stream (> 0) forks from the
  // program where the op is issued: the op starts once every op issued before it on stream 0
  // has finished, its own stream is free, and the writers of its inputs have finished. Any op
  // waits for the writers of its inputs (the join). A tensor whose last use is an op on a side
  // stream is kept until the end of the step (last_use() = -1), so no buffer is reused while a
  // side stream may still touch it.
  int stream = 0;
};

// Why op's kv_block does not suit its kind ("" when it does): a kind that reads KV pages needs
// kv_block > 0, every other kind kv_block == 0 (a contiguous cache is read by the dense kinds
// only; the paged_kv pass turns them into their paged kinds).
[[nodiscard]] std::string kv_block_error(const Op& op);

struct Graph {
  std::string model;                 // model name
  Workload workload;
  std::vector<Tensor> tensors;       // indexed by Tensor::id
  std::vector<Op> ops;               // execution order
  int64_t layers_total = 0;          // layers in the model
  int64_t layers_built = 0;          // layers present in this graph (sampling)
  bool graphed = false;              // launches replayed from a captured CUDA graph
  std::vector<std::string> applied;  // optimization steps applied, in order

  int add_tensor(Tensor t);          // assigns and returns the id; throws ConfigError on an overflowing shape
  int add_op(Op op);                 // assigns and returns the id
  [[nodiscard]] const Tensor& tensor(int id) const { return tensors.at(static_cast<std::size_t>(id)); }
  [[nodiscard]] Tensor& tensor(int id) { return tensors.at(static_cast<std::size_t>(id)); }
  // Id of the first tensor named `name`, or −1.
  [[nodiscard]] int find_tensor(std::string_view name) const;
  // Scale from the built layers to the model: L / built.
  [[nodiscard]] double layer_scale() const;
  // Checks ids, that every activation is written before it is read, shapes are positive and
  // each op's kv_block suits its kind (kv_block_error). Throws std::logic_error naming the op: a
  // failure is a bug in a builder or pass.
  void check() const;
};

}  // namespace perfsim
