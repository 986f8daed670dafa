#include "core/config/model.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/errors.hpp"
#include "core/config/size_text.hpp"

namespace perfsim {

namespace {

// The counts are templates over the integer type: int64_t for the accessors, __int128 for
// validate() to check that a configuration's counts fit int64 before anything uses them.

// One MLP (or expert) of inner size f, with its biases.
template <class I>
I mlp_params(const ModelConfig& m, I f) {
  const I h = m.hidden;
  const bool swiglu = m.activation == Activation::swiglu;
  I p = swiglu ? 3 * h * f : 2 * h * f;
  if (m.bias) p += (swiglu ? 2 * f : f) + h;
  return p;
}

// Attention and norms of one layer, with their biases.
template <class I>
I attention_params(const ModelConfig& m) {
  const I h = m.hidden, kv = m.kv_dim();
  I p = h * h /*q*/ + 2 * h * kv /*k,v*/ + h * h /*o*/;
  p += m.norm == NormKind::layernorm ? 2 * 2 * h : 2 * h;  // gamma (+beta)
  if (m.bias) p += h + 2 * kv + h;
  return p;
}

// A layer's MLP when `routed` of its experts count.
template <class I>
I layer_mlp_params(const ModelConfig& m, I routed) {
  if (!m.moe()) return mlp_params<I>(m, m.ffn_hidden);
  const I router = static_cast<I>(m.hidden) * m.experts;
  return router + (routed + m.shared_experts) * mlp_params<I>(m, m.expert_width());
}

template <class I>
I non_layer(const ModelConfig& m) {
  const I hidden = m.hidden;
  I p = m.vocab * hidden;                            // token embedding
  if (!m.rope && !m.alibi) p += m.max_seq * hidden;  // learned positions
  if (!m.tied_embeddings) p += m.vocab * hidden;     // lm_head
  p += m.norm == NormKind::layernorm ? 2 * hidden : hidden;  // final norm
  return p;
}

template <class I>
I all_params(const ModelConfig& m) {
  return m.layers * (attention_params<I>(m) + layer_mlp_params<I>(m, m.experts)) + non_layer<I>(m);
}

}  // namespace

int64_t ModelConfig::layer_params() const {
  return attention_params<int64_t>(*this) + layer_mlp_params<int64_t>(*this, experts);
}

int64_t ModelConfig::active_layer_params() const {
  return attention_params<int64_t>(*this) + layer_mlp_params<int64_t>(*this, top_k);
}

int64_t ModelConfig::non_layer_params() const { return non_layer<int64_t>(*this); }

void validate(const ModelConfig& m) {
  if (m.cnn) {
    validate(*m.cnn);
    return;
  }
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
  auto at_most = [&](int64_t v, const char* field, int64_t bound) {
    if (v > bound)
      throw ConfigError(fmt::format("model '{}': {} = {} is beyond {}; lower {}", m.name, field,
                                    size_text(static_cast<double>(v)), grouped(bound), field));
  };
  at_most(m.layers, "layers", max_layers);
  at_most(m.hidden, "hidden", max_hidden);
  at_most(m.ffn_hidden, "ffn_hidden", max_ffn_hidden);
  at_most(m.expert_ffn_hidden, "expert_ffn_hidden", max_ffn_hidden);
  at_most(m.vocab, "vocab", max_vocab);
  at_most(m.max_seq, "max_seq", max_model_seq);
  at_most(m.experts, "experts", max_experts);
  at_most(m.shared_experts, "shared_experts", max_experts);
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
  if (!std::isfinite(m.capacity_factor) || m.capacity_factor > max_capacity_factor)
    throw ConfigError(fmt::format("model '{}': capacity_factor = {} must be a finite number <= {}; "
                                  "1.25 is the usual training value", m.name,
                                  std::isnan(m.capacity_factor) ? "nan" : fmt::format("{}", m.capacity_factor),
                                  max_capacity_factor));
  if (m.experts > 0 && !(m.capacity_factor > 0))
    throw ConfigError(fmt::format("model '{}': capacity_factor must be > 0 (got {})", m.name,
                                  m.capacity_factor));
  // Every weight tensor is at most the parameter count, so bounding it bounds them too.
  const __int128 params = all_params<__int128>(m);
  if (params > max_params)
    throw ConfigError(fmt::format("model '{}': {} parameters is beyond {}; lower layers, hidden, "
                                  "ffn_hidden, experts or vocab", m.name,
                                  size_text(static_cast<double>(params)), grouped(max_params)));
  if (m.rope && m.alibi)
    throw ConfigError(fmt::format("model '{}': rope and alibi are two ways of placing positions; choose one",
                                  m.name));
  if (m.rope && m.head_dim() % 2 != 0)
    throw ConfigError(fmt::format("model '{}': rotary embeddings need an even head_dim (got {})",
                                  m.name, m.head_dim()));
}

}  // namespace perfsim
