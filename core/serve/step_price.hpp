// The cost model's price of one engine step (engine_step.hpp): the step's ops at their shapes
// for this step's batch, from graphs the builders make and the cost model prices.
//
// A step of T tokens over S sampling sequences costs
//   dense(T)             every op outside attention over the T tokens (norms, projections,
//                        MLP, embedding), from a decode graph of batch T
// + head(S)              final norm and lm_head over the S sequences that sample
// + decode attention     one op over the n decoding sequences at their mean context (linear in
//                        the context between two builds): the executed engine's step graph of
//                        n decodes (its varlen kernel over pages) when the stack has flash
//                        attention and paged KV and the engine is one stage; else the decode
//                        graph of batch n
// + prefill attention    per prompt chunk of q tokens after p cached ones (a prefill graph with
//                        `cached` = p; linear in p between two builds)
// + KV appends and host work (hardware.host_overhead per step, the engine's scheduling and
//   sampling; and for eager steps hardware.engine_host_per_step + engine_host_per_op × the
//   step's ops, the executed engine's preparation of each step, which calibration fits), + swap
//   copies over the host link.
// Pieces are memoised by their shape, so a simulation of many steps builds each shape once.
// An engine over several GPUs (`layout`: tp tensor-parallel ranks, pp pipeline stages) prices
// each stage's rank graph (its all-reduces and stage sends among the dense ops) and a step as
// the sum over its stages: the latency of one batch through the pipeline. The KV bytes and the
// memory besides them are one GPU's: the rank of the stage that holds the most.
// With cuda_graphs in the stack, decode-only steps of up to 512 sequences replay a graph
// captured for the next capture size (1, 2, 4, 8, then multiples of 8, as vLLM); other steps run
// eagerly.
#pragma once
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/passes/passes.hpp"
#include "core/serve/engine_step.hpp"
#include "core/config/model.hpp"

namespace perfsim {

class StepPricer {
 public:
  // The graph passes of stack steps 0..upto (serving knobs, batch and kv_cache left out).
  StepPricer(const ModelConfig& m, const Hardware& hw, const std::vector<StackStep>& stack, std::size_t upto,
             const ParallelSpec& layout = {});

  [[nodiscard]] double price(const EngineStep& step);
  // Of price(step), the host's part: host_overhead, and for an eager step engine_host_per_step
  // plus engine_host_per_op × the step's ops.
  [[nodiscard]] double host(const EngineStep& step) const;
  // Whether the step replays a captured CUDA graph (cuda_graphs, decodes only, n ≤ 512).
  [[nodiscard]] bool replayed(const EngineStep& step) const;

  // The pieces (seconds), eager unless `graphed`.
  [[nodiscard]] double dense(int64_t tokens, bool graphed = false);
  [[nodiscard]] double head(int64_t seqs, bool graphed = false);
  [[nodiscard]] double decode_attention(int64_t seqs, double mean_kv, bool graphed = false);
  [[nodiscard]] double prefill_attention(int64_t seqs, int64_t tokens, int64_t position);

  [[nodiscard]] bool cuda_graphs() const { return m_cuda_graphs; }
  // vLLM's capture sizes: the smallest of 1, 2, 4, 8, 16, 24, ... 512 holding n (0 above 512).
  [[nodiscard]] static int64_t capture_size(int64_t n);

  // KV bytes one token holds over all layers, and what the engine holds besides the KV pool:
  // weights, and the activations and workspace of its largest step, the larger of a step of
  // `step_tokens` prompt tokens (logits for one row per prompt) and a decode step of
  // min(step_tokens, max_seqs) sequences (logits for each).
  // With a layout: one GPU's, the stage of the most layers (its KV heads / tp).
  [[nodiscard]] double kv_bytes_per_token() const { return m_kv_bytes_per_token; }
  [[nodiscard]] const ParallelSpec& layout() const { return m_layout; }
  [[nodiscard]] double memory_besides_kv(int64_t step_tokens, int64_t max_seqs = 1);

  [[nodiscard]] int64_t graph_builds() const { return m_builds; }
  // Bytes of one KV block (over all layers), for pricing swaps over the host link.
  void set_swap_block_bytes(double bytes) { m_swap_block_bytes = bytes; }

 private:
  struct Parts {
    double dense = 0, head = 0, attention = 0;
  };
  Parts priced(const Workload& w, bool graphed);
  Workload decode(int64_t batch, int64_t kv) const;
  // Decode attention (and KV appends) of `seqs` sequences at `kv` keys as the executed engine
  // runs it: its step graph's varlen kernel over pages (build_engine_step).
  double engine_decode_attention(int64_t seqs, int64_t kv, bool graphed);
  [[nodiscard]] BuildOptions options(int stage) const;

  ModelConfig m_model;
  Hardware m_hw;
  ParallelSpec m_layout;           // tp and pp of one engine (dp = 1)
  std::vector<StackStep> m_stack;  // graph passes only
  std::vector<StackStep> m_engine_stack;  // those the executed engine's step graph takes
  bool m_cuda_graphs = false;
  bool m_engine_attention = false;  // decode attention priced from the engine's step graph
  double m_kv_bytes_per_token = 0;
  int64_t m_builds = 0;
  double m_step_ops = 0;  // ops of one engine step over all layers (for hardware.engine_host_per_op)
  std::unordered_map<int64_t, double> m_dense[2], m_head[2];
  std::unordered_map<int64_t, std::pair<double, double>> m_decode[2];  // n -> (at kv1, at kv2)
  std::map<std::pair<int64_t, int64_t>, std::pair<double, double>> m_prefill;  // (n, q) -> (p=0, p=p2)
  int64_t m_kv1 = 0, m_kv2 = 0;
  double m_swap_block_bytes = 0;
};

}  // namespace perfsim
