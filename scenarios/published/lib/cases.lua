-- Shared pieces of the published-results suite (`perfsim validate --published`): the model
-- families the sources trained, as their configurations give them.
local M = {}

-- Megatron-LM's GPT (Narayanan et al. 2021, §5; Korthikanti et al. 2022, §6): GPT-2/3
-- architecture, MLP 4h, LayerNorm, learned positions, the GPT-2 vocabulary padded to 51,200,
-- sequence 2,048.
function M.megatron_gpt(name, layers, hidden, heads)
  return model {
    name = name, layers = layers, hidden = hidden, heads = heads, kv_heads = heads,
    ffn_hidden = 4 * hidden, vocab = 51200, max_seq = 2048,
    activation = "gelu", norm = "layernorm", rope = false, tied_embeddings = true, bias = true,
  }
end

-- MosaicML's MPT (llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml): expansion ratio 4,
-- ALiBi instead of positions, no biases, the GPT-NeoX vocabulary padded to 50,368.
function M.mpt(name, layers, hidden, heads, seq)
  return model {
    name = name, layers = layers, hidden = hidden, heads = heads, kv_heads = heads,
    ffn_hidden = 4 * hidden, vocab = 50368, max_seq = seq,
    activation = "gelu", norm = "layernorm", rope = false, alibi = true,
    tied_embeddings = true, bias = false,
  }
end

return M
