-- models.lua: the model zoo. Dimensions come from the published configurations cited per
-- family. Fields are those of model{} (docs/DSL.md); `aliases` are extra lookup names.

-- GPT-2 / GPT-3 style: GELU MLP (4h), LayerNorm, learned positions, tied embeddings, biases.
local function gpt(name, layers, hidden, heads, ffn_hidden, extra)
  local m = {
    name = name, layers = layers, hidden = hidden, heads = heads, kv_heads = heads,
    ffn_hidden = ffn_hidden, vocab = 50257, max_seq = 1024,
    activation = "gelu", norm = "layernorm", rope = false, tied_embeddings = true, bias = true,
  }
  for k, v in pairs(extra or {}) do m[k] = v end
  return m
end

-- Llama style: SwiGLU MLP, RMSNorm, rotary positions, untied lm_head, no biases.
local function llama(name, layers, hidden, heads, kv_heads, ffn_hidden, vocab, max_seq, aliases)
  return {
    name = name, aliases = aliases, layers = layers, hidden = hidden, heads = heads,
    kv_heads = kv_heads, ffn_hidden = ffn_hidden, vocab = vocab, max_seq = max_seq,
    activation = "swiglu", norm = "rmsnorm", rope = true, tied_embeddings = false, bias = false,
  }
end

-- A mixture-of-experts variant of `m`: the MoE fields of model{} (docs/DSL.md) added.
local function moe(m, fields)
  for k, v in pairs(fields) do m[k] = v end
  return m
end

-- ResNet (He et al. 2016, "Deep Residual Learning for Image Recognition", Table 1) at 224×224,
-- torchvision's v1.5 (the stride on each bottleneck's 3×3): stages of {blocks, width, stride};
-- bottleneck blocks put out 4 × width channels.
local function resnet(name, blocks, bottleneck, aliases)
  return {
    kind = "cnn", name = name, aliases = aliases, image = 224, in_channels = 3, stem_width = 64,
    stages = {{blocks[1], 64, 1}, {blocks[2], 128, 2}, {blocks[3], 256, 2}, {blocks[4], 512, 2}},
    bottleneck = bottleneck, classes = 1000,
  }
end

return {
  -- GPT-2: Radford et al. 2019; https://huggingface.co/openai-community/gpt2/blob/main/config.json
  gpt("gpt2", 12, 768, 12, 3072, {aliases = {"gpt2-small", "gpt-2"}}),
  gpt("gpt2-medium", 24, 1024, 16, 4096),
  gpt("gpt2-large", 36, 1280, 20, 5120),
  gpt("gpt2-xl", 48, 1600, 25, 6400),
  -- GPT-3 175B: Brown et al. 2020, arXiv:2005.14165, Table 2.1 (n_ctx 2048)
  gpt("gpt-3-175b", 96, 12288, 96, 49152, {max_seq = 2048, aliases = {"gpt3-175b", "gpt-3"}}),
  -- Llama 2: Touvron et al. 2023, arXiv:2307.09288; https://huggingface.co/meta-llama/Llama-2-7b-hf
  llama("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, {"llama2-7b"}),
  llama("llama-2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, {"llama2-13b"}),
  llama("llama-2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, {"llama2-70b"}),
  -- Llama 3: https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json and -70B
  llama("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, {"llama3-8b", "meta-llama-3-8b"}),
  llama("llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, {"llama3-70b", "meta-llama-3-70b"}),
  -- Llama 3.1 405B: Llama Team 2024, arXiv:2407.21783, Table 3 (128K context)
  llama("llama-3-405b", 126, 16384, 128, 8, 53248, 128256, 131072, {"llama3-405b", "llama-3.1-405b"}),
  -- Mixtral 8x7B: Jiang et al. 2024, arXiv:2401.04088, Table 1;
  -- https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json (46.7B, 12.9B active)
  moe(llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, {"mixtral"}), {experts = 8, top_k = 2}),
  -- Qwen1.5-MoE-A2.7B, a fine-grained MoE: 60 experts of 1408, top 4, and a shared expert of
  -- 5632 (= 4 experts' width); https://huggingface.co/Qwen/Qwen1.5-MoE-A2.7B/blob/main/config.json
  -- (14.3B, 2.7B active). Its shared expert's sigmoid gate (2,048 weights a layer) is left out.
  moe(llama("qwen1.5-moe-a2.7b", 24, 2048, 16, 16, 5632, 151936, 8192, {"qwen-moe", "qwen1.5-moe"}),
      {experts = 60, top_k = 4, expert_ffn_hidden = 1408, shared_experts = 4}),
  -- Image classifiers (kind = "cnn"): 11.7 M, 21.8 M, 25.6 M, 44.5 M and 60.2 M parameters.
  resnet("resnet-18", {2, 2, 2, 2}, false, {"resnet18"}),
  resnet("resnet-34", {3, 4, 6, 3}, false, {"resnet34"}),
  resnet("resnet-50", {3, 4, 6, 3}, true, {"resnet50", "rn50"}),
  resnet("resnet-101", {3, 4, 23, 3}, true, {"resnet101"}),
  resnet("resnet-152", {3, 8, 36, 3}, true, {"resnet152"}),
  -- Test models: small enough to execute every layer in unit tests.
  {kind = "cnn", name = "tiny-resnet", image = 32, in_channels = 3, stem_width = 8,
   stages = {{2, 8, 1}, {2, 16, 2}}, bottleneck = true, classes = 10},
  llama("tiny-llama", 2, 64, 4, 2, 128, 256, 256),
  moe(llama("tiny-moe", 2, 64, 4, 2, 128, 256, 256), {experts = 8, top_k = 2, expert_ffn_hidden = 64}),
  gpt("tiny-gpt", 2, 64, 4, 256, {vocab = 256, max_seq = 256}),
}
