-- Shared pieces of the published-results suite (`perfsim validate --published`): the model
-- families the sources trained or served, and one constructor per source that turns a row of
-- its table into a scenario (its last stack step the measured configuration).
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

-- Megatron-LM SC21, Table 1: GPT on A100s (Selene, 80 GB), full activation recompute, fp16.
-- r: size, layers, hidden, heads, tp, pp, micro, global (batch), gpus, interleave, tflops
-- (achieved teraFLOP/s per GPU, recomputation counted).
function M.megatron_sc21(r)
  local dp = math.floor(r.gpus / (r.tp * r.pp))
  return scenario {
    name = "megatron-sc21 " .. r.size,
    model = M.megatron_gpt("megatron-" .. r.size, r.layers, r.hidden, r.heads),
    hardware = "A100-80GB",
    workload = train { batch = r.micro, seq = 2048, grad_accum = math.floor(r.global / (r.micro * dp)) },
    parallel = { tp = r.tp, pp = r.pp, dp = dp, interleave = r.interleave or 1 },
    stacks = { step("published", "fp16", "recompute", "fused_optimizer") },
    execute = { enabled = false },
    published = {
      source = "megatron-sc21",
      citation = "Narayanan et al. 2021 (SC21), Table 1",
      url = "https://arxiv.org/abs/2104.04473",
      metric = "hardware_tflops_per_gpu", value = r.tflops,
    },
  }
end

-- Korthikanti et al. 2022, Table 5: iteration seconds of GPT on A100s, with full recompute
-- ("full") or selective recompute and sequence parallelism ("selective"), micro-batch 1 unless
-- given. r: size, mode, layers, hidden, heads, tp, pp, global, micro, interleave, seconds.
function M.korthikanti(r)
  local recompute = r.mode == "full" and "recompute" or {recompute = "selective"}
  local micro = r.micro or 1
  return scenario {
    name = "korthikanti " .. r.size .. " " .. r.mode,
    model = M.megatron_gpt("megatron-" .. r.size, r.layers, r.hidden, r.heads),
    hardware = "A100-80GB",
    workload = train { batch = micro, seq = 2048, grad_accum = math.floor(r.global / micro) },
    parallel = { tp = r.tp, pp = r.pp, sp = r.mode == "selective", interleave = r.interleave or 1 },
    stacks = { step("published", "fp16", recompute, "fused_optimizer") },
    execute = { enabled = false },
    published = {
      source = "korthikanti-2022",
      citation = "Korthikanti et al. 2022, Table 5",
      url = "https://arxiv.org/abs/2205.05198",
      metric = "step_time", value = r.seconds,
    },
  }
end

-- MosaicML llm-foundry training benchmarks: MPT on 8 GPUs, sequence 2,048, FSDP FULL_SHARD,
-- bf16, flash attention. r: size, layers, hidden, heads, hardware, tag, micro, grad_accum,
-- checkpointing (activation checkpointing on), tokens (tokens/s per GPU).
function M.mpt_fsdp(r)
  local passes = {"bf16", "flash_attention", "fused_optimizer"}
  if r.checkpointing then passes[#passes + 1] = "recompute" end
  return scenario {
    name = string.format("mpt-%s %s fsdp", r.size, r.tag),
    model = M.mpt("mpt-" .. r.size, r.layers, r.hidden, r.heads, 2048),
    hardware = r.hardware,
    workload = train { batch = r.micro, seq = 2048, grad_accum = r.grad_accum },
    parallel = { dp = 8, zero = 3 },
    stacks = { step("published", unpack(passes)) },
    execute = { enabled = false },
    published = {
      source = "mpt-fsdp",
      citation = "MosaicML llm-foundry, MPT training benchmarks (scripts/train/benchmarking/README.md)",
      url = "https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md",
      metric = "tokens_per_s_per_gpu", value = r.tokens,
    },
  }
end

-- TensorRT-LLM performance overview: Llama 3.1 8B FP8 on one GPU (TP1), every request queued at
-- once (trtllm-bench throughput), total output tokens/s. perfsim's stack: continuous batching,
-- paged KV, CUDA graphs, fp8 GEMMs, the KV cache at 0.95 of free memory; its KV cache stays
-- bf16 (the FP8 checkpoints quantize the KV cache too where their config says so).
-- r: hardware, tag, input, output, requests, tokens.
function M.trtllm_8b(r)
  return scenario {
    name = string.format("trtllm 8b %d/%d %s", r.input, r.output, r.tag),
    model = model("llama-3-8b"),
    hardware = r.hardware,
    workload = serve { requests = r.requests, seed = 1, arrivals = poisson { rate = 1e6 },
                       prompt = r.input, output = r.output },
    stacks = {
      step("published", "bf16", "flash_attention",
           {scheduler = "continuous", max_batch = 2048, max_tokens = 8192, gpu_memory = 0.95},
           "paged_kv", "cuda_graphs", "fp8"),
    },
    execute = { enabled = false },
    published = {
      source = "trtllm-throughput",
      citation = "NVIDIA TensorRT-LLM, Performance Overview, Llama 3.1 8B (docs/source/performance/perf-overview.md)",
      url = "https://github.com/NVIDIA/TensorRT-LLM/blob/main/docs/source/performance/perf-overview.md",
      metric = "output_tokens_per_s", value = r.tokens,
      note = "Llama 3.1 8B has Llama 3 8B's dimensions (the zoo's llama-3-8b); all requests arrive at t = 0",
    },
  }
end

return M
