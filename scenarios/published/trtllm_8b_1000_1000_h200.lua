-- TensorRT-LLM performance overview, Llama 3.1 8B FP8 on one H200 (TP1), input 1000 / output 1000
-- tokens, 3,000 requests queued at once (trtllm-bench throughput: max load), total output tokens/s.
-- The engine's options as the page gives them: CUDA graphs, KV cache at 0.95 of free memory.
-- perfsim's stack: continuous batching, paged KV, CUDA graphs, fp8 GEMMs; its KV cache stays
-- bf16 (the FP8 checkpoints quantize the KV cache too where their config says so).
return scenario {
  name = "trtllm 8b 1000/1000 h200",
  model = model("llama-3-8b"),
  hardware = "H200",
  workload = serve { requests = 3000, seed = 1, arrivals = poisson { rate = 1e6 }, prompt = 1000, output = 1000 },
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
    metric = "output_tokens_per_s", value = 17744,
    note = "Llama 3.1 8B has Llama 3 8B's dimensions (the zoo's llama-3-8b); all requests arrive at t = 0",
  },
}
