// Transformer model configuration (decoder-only, GPT or Llama style).
#pragma once
#include <cstdint>
#include <string>

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
  bool rope = false;             // rotary embeddings (else learned positions)
  bool tied_embeddings = false;  // lm_head shares the embedding matrix
  bool bias = false;             // linear layers carry biases (GPT-2); counted in params only

  [[nodiscard]] int64_t head_dim() const { return hidden / heads; }
  [[nodiscard]] int64_t kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  [[nodiscard]] int64_t kv_dim() const { return kv_heads_or_heads() * head_dim(); }
  // Parameters of one transformer layer (attention + MLP + norms).
  [[nodiscard]] int64_t layer_params() const;
  // Embedding (+ learned positions) + lm_head when not tied + final norm.
  [[nodiscard]] int64_t non_layer_params() const;
  [[nodiscard]] int64_t params() const { return layers * layer_params() + non_layer_params(); }
};

// Throws ConfigError naming the field when the configuration is inconsistent
// (heads not dividing hidden, kv_heads not dividing heads, non-positive sizes).
void validate(const ModelConfig& m);

}  // namespace perfsim
