// Model configurations with published sizes, for the graph, pass and formula tests.
#pragma once
#include "core/config/model.hpp"

namespace perfsim::test_models {

inline ModelConfig llama(const char* name, int64_t layers, int64_t hidden, int64_t heads,
                         int64_t kv_heads, int64_t ffn, int64_t vocab, int64_t max_seq) {
  ModelConfig m;
  m.name = name;
  m.layers = layers, m.hidden = hidden, m.heads = heads, m.kv_heads = kv_heads;
  m.ffn_hidden = ffn, m.vocab = vocab, m.max_seq = max_seq;
  m.activation = Activation::swiglu;
  m.norm = NormKind::rmsnorm;
  m.rope = true;
  return m;
}

inline ModelConfig gpt(const char* name, int64_t layers, int64_t hidden, int64_t heads,
                       int64_t vocab, int64_t max_seq) {
  ModelConfig m;
  m.name = name;
  m.layers = layers, m.hidden = hidden, m.heads = heads;
  m.ffn_hidden = 4 * hidden, m.vocab = vocab, m.max_seq = max_seq;
  m.activation = Activation::gelu;
  m.norm = NormKind::layernorm;
  m.tied_embeddings = true;
  m.bias = true;
  return m;
}

// Touvron et al. 2023 (Llama 2), Table/config of the 7B model.
inline ModelConfig llama2_7b() { return llama("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096); }
// Meta Llama 3 8B config: GQA with 8 KV heads, 128k vocabulary.
inline ModelConfig llama3_8b() { return llama("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192); }
// Radford et al. 2019 (GPT-2) small and medium.
inline ModelConfig gpt2_small() { return gpt("gpt2", 12, 768, 12, 50257, 1024); }
inline ModelConfig gpt2_medium() { return gpt("gpt2-medium", 24, 1024, 16, 50257, 1024); }
// Small shapes for structural tests: GQA (4 query heads share 2 KV heads).
inline ModelConfig tiny_llama() { return llama("tiny-llama", 4, 64, 4, 2, 128, 100, 256); }
inline ModelConfig tiny_gpt() { return gpt("tiny-gpt", 4, 64, 4, 100, 256); }

// Mixture of experts: tiny_llama's attention with 8 experts of width 64, top 2, and optionally
// shared experts (their combined width `shared` · 64).
inline ModelConfig tiny_moe(int64_t shared = 0) {
  ModelConfig m = llama("tiny-moe", 4, 64, 4, 2, 128, 100, 256);
  m.experts = 8;
  m.top_k = 2;
  m.expert_ffn_hidden = 64;
  m.shared_experts = shared;
  return m;
}
// Jiang et al. 2024 (Mixtral 8x7B): Mistral 7B's attention, 8 experts of 14336, top 2.
inline ModelConfig mixtral_8x7b() {
  ModelConfig m = llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768);
  m.experts = 8;
  m.top_k = 2;
  return m;
}

}  // namespace perfsim::test_models
