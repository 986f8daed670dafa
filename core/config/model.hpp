// Transformer model configuration (decoder-only, GPT or Llama style).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/config/cnn.hpp"

namespace perfsim {

enum class Activation { gelu, swiglu };
enum class NormKind { layernorm, rmsnorm };

struct ModelConfig {
  std::string name;
  int64_t layers = 0;
  int64_t hidden = 0;       // h
  int64_t heads = 0;        // query heads
  int64_t kv_heads = 0;     // key/value heads (GQA when < heads; 0 means = heads)
  int64_t ffn_hidden = 0;   // MLP inner size (per branch for SwiGLU)
  int64_t vocab = 0;
  int64_t max_seq = 0;
  Activation activation = Activation::gelu;
  NormKind norm = NormKind::layernorm;
  bool rope = false;             // rotary embeddings (else learned positions, unless alibi)
  // ALiBi (Press et al. 2022): no position embedding; each head's attention scores get a linear
  // bias −m_h·(i − j) (core/graph/alibi.hpp). Excludes rope.
  bool alibi = false;
  bool tied_embeddings = false;  // lm_head shares the embedding matrix
  bool bias = false;             // linear layers carry biases (GPT-2); counted in params only
  // Mixture of experts: each MoE layer's MLP is `experts` routed experts, each token sent to
  // `top_k` of them by a linear router, plus `shared_experts` every token goes through.
  int64_t experts = 0;            // routed experts per MoE layer; 0: a dense model
  int64_t top_k = 0;              // experts per token
  int64_t expert_ffn_hidden = 0;  // each expert's MLP inner size (0: ffn_hidden)
  int64_t shared_experts = 0;     // always-on experts, each expert_ffn_hidden wide
  // Rows each expert's buffer holds: capacity_factor · tokens · top_k / experts (tokens past it
  // are dropped at that expert). 1.25 is GShard's and Switch Transformer's training default.
  double capacity_factor = 1.25;
  // An image classifier (core/config/cnn.hpp) instead of a transformer: the transformer fields
  // above stay 0 and every count comes from it.
  std::optional<CnnConfig> cnn;

  [[nodiscard]] bool image_model() const { return cnn.has_value(); }
  [[nodiscard]] int64_t head_dim() const { return heads > 0 ? hidden / heads : 0; }
  [[nodiscard]] int64_t kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  [[nodiscard]] int64_t kv_dim() const { return kv_heads_or_heads() * head_dim(); }
  [[nodiscard]] bool moe() const { return experts > 0; }
  [[nodiscard]] int64_t expert_width() const { return expert_ffn_hidden > 0 ? expert_ffn_hidden : ffn_hidden; }
  // Parameters of one transformer layer (attention + MLP + norms); an MoE layer (every layer
  // of an MoE model) counts every expert and the router.
  [[nodiscard]] int64_t layer_params() const;
  // Parameters one token's forward uses in a layer: top_k routed experts, not all of them.
  [[nodiscard]] int64_t active_layer_params() const;
  // Embedding (+ learned positions) + lm_head when not tied + final norm.
  [[nodiscard]] int64_t non_layer_params() const;
  [[nodiscard]] int64_t params() const {
    return cnn ? cnn->params() : layers * layer_params() + non_layer_params();
  }
  [[nodiscard]] int64_t active_params() const {
    return cnn ? cnn->params() : layers * active_layer_params() + non_layer_params();
  }
};

// Bounds no real model approaches, chosen so params() and every tensor a graph builds from the
// model stay far from int64 overflow.
inline constexpr int64_t max_layers = int64_t{1} << 16;
inline constexpr int64_t max_hidden = int64_t{1} << 20;
inline constexpr int64_t max_ffn_hidden = int64_t{1} << 22;  // ffn_hidden and expert_ffn_hidden
inline constexpr int64_t max_vocab = int64_t{1} << 24;
inline constexpr int64_t max_model_seq = int64_t{1} << 24;   // max_seq
inline constexpr int64_t max_experts = int64_t{1} << 16;     // experts and shared_experts
inline constexpr int64_t max_params = int64_t{1} << 50;      // params(), computed without overflow
inline constexpr double max_capacity_factor = 65536;

// Throws ConfigError naming the field when the configuration is inconsistent
// (heads not dividing hidden, kv_heads not dividing heads, non-positive sizes, sizes beyond
// the bounds above, a non-finite capacity_factor).
void validate(const ModelConfig& m);

}  // namespace perfsim
