-- Llama-3-70B decode on one 8-GPU node: the weights (141 GB in bf16) do not fit one GPU, so
-- tensor parallelism splits every layer over the node (Megatron column/row splits, two
-- all-reduces a layer over NVLink). The stack then cuts what each token costs: flash attention,
-- CUDA graphs (launches matter more once each GPU's share of a layer is small), fp8 weights,
-- and a larger batch.
local opt = options {
  tp         = {"GPUs the model is split over (tensor parallel)", 8},
  batch      = {"sequences decoded together in the last step", 32},
  prompt     = {"prompt tokens", 2048},
  new_tokens = {"generated tokens", 256},
}

return scenario {
  name = "llm_decode_70b",
  description = "Llama-3-70B decode, tensor-parallel across one node",
  model = model("llama-3-70b"),
  hardware = {"H100-SXM", "H200-SXM"},
  workload = decode { batch = 1, prompt = opt.prompt, new_tokens = opt.new_tokens },
  parallel = { tp = opt.tp },
  stacks = {
    step("bf16", "bf16"),
    step("+flash_attention", "flash_attention"),
    step("+cuda_graphs", "cuda_graphs"),
    step("+fp8", "fp8"),
    step("+batching", {batch = opt.batch}),
  },
  execute = { enabled = false },
}
