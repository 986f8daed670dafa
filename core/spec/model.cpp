#include "core/spec/model.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace perfsim {

int64_t ModelConfig::layer_params() const {
  const int64_t h = hidden, kv = kv_dim(), f = ffn_hidden;
  const int64_t attn = h * h /*q*/ + 2 * h * kv /*k,v*/ + h * h /*o*/;
  const int64_t mlp = activation == Activation::swiglu ? 3 * h * f : 2 * h * f;
  const int64_t norms = norm == NormKind::layernorm ? 2 * 2 * h : 2 * h;  // gamma (+beta)
  int64_t biases = 0;
  if (bias) biases = (h + 2 * kv + h) + (activation == Activation::swiglu ? 2 * f : f) + h;
  return attn + mlp + norms + biases;
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
  if (m.rope && m.head_dim() % 2 != 0)
    throw ConfigError(fmt::format("model '{}': rotary embeddings need an even head_dim (got {})",
                                  m.name, m.head_dim()));
}

}  // namespace perfsim
