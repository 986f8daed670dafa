#include "core/spec/model.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace perfsim {

namespace {

// One MLP (or expert) of inner size f, with its biases.
int64_t mlp_params(const ModelConfig& m, int64_t f) {
  const int64_t h = m.hidden;
  const bool swiglu = m.activation == Activation::swiglu;
  int64_t p = swiglu ? 3 * h * f : 2 * h * f;
  if (m.bias) p += (swiglu ? 2 * f : f) + h;
  return p;
}

// Attention and norms of one layer, with their biases.
int64_t attention_params(const ModelConfig& m) {
  const int64_t h = m.hidden, kv = m.kv_dim();
  int64_t p = h * h /*q*/ + 2 * h * kv /*k,v*/ + h * h /*o*/;
  p += m.norm == NormKind::layernorm ? 2 * 2 * h : 2 * h;  // gamma (+beta)
  if (m.bias) p += h + 2 * kv + h;
  return p;
}

// A layer's MLP when `routed` of its experts count.
int64_t layer_mlp_params(const ModelConfig& m, int64_t routed) {
  if (!m.moe()) return mlp_params(m, m.ffn_hidden);
  const int64_t router = m.hidden * m.experts;
  return router + (routed + m.shared_experts) * mlp_params(m, m.expert_width());
}

}  // namespace

int64_t ModelConfig::layer_params() const { return attention_params(*this) + layer_mlp_params(*this, experts); }

int64_t ModelConfig::active_layer_params() const {
  return attention_params(*this) + layer_mlp_params(*this, top_k);
}

int64_t ModelConfig::non_layer_params() const {
  int64_t p = vocab * hidden;                       // token embedding
  if (!rope) p += max_seq * hidden;                 // learned positions
  if (!tied_embeddings) p += vocab * hidden;        // lm_head
  p += norm == NormKind::layernorm ? 2 * hidden : hidden;  // final norm
  return p;
}

void validate(const ModelConfig& m) {
  auto positive = [&](int64_t v, const char* field) {
    if (v <= 0)
      throw ConfigError(fmt::format("model '{}': {} must be > 0 (got {})", m.name, field, v));
  };
  positive(m.layers, "layers");
  positive(m.hidden, "hidden");
  positive(m.heads, "heads");
  positive(m.ffn_hidden, "ffn_hidden");
  positive(m.vocab, "vocab");
  positive(m.max_seq, "max_seq");
  if (m.hidden % m.heads != 0)
    throw ConfigError(fmt::format("model '{}': heads ({}) must divide hidden ({})", m.name,
                                  m.heads, m.hidden));
  if (m.kv_heads < 0 || (m.kv_heads > 0 && m.heads % m.kv_heads != 0))
    throw ConfigError(fmt::format("model '{}': kv_heads ({}) must divide heads ({})", m.name,
                                  m.kv_heads, m.heads));
  if (m.experts < 0 || m.top_k < 0 || m.shared_experts < 0 || m.expert_ffn_hidden < 0)
    throw ConfigError(fmt::format("model '{}': experts, top_k, shared_experts and expert_ffn_hidden "
                                  "must be >= 0", m.name));
  if (m.experts > 0 && (m.top_k < 1 || m.top_k > m.experts))
    throw ConfigError(fmt::format("model '{}': top_k ({}) must be between 1 and experts ({})", m.name,
                                  m.top_k, m.experts));
  if (m.experts == 0 && (m.top_k > 0 || m.shared_experts > 0))
    throw ConfigError(fmt::format("model '{}': top_k and shared_experts need experts > 0", m.name));
  if (m.experts > 0 && !(m.capacity_factor > 0))
    throw ConfigError(fmt::format("model '{}': capacity_factor must be > 0 (got {})", m.name,
                                  m.capacity_factor));
  if (m.rope && m.head_dim() % 2 != 0)
    throw ConfigError(fmt::format("model '{}': rotary embeddings need an even head_dim (got {})",
                                  m.name, m.head_dim()));
}

}  // namespace perfsim
