-- Fixture: a scenario that sets every field explicitly (tests/dsl/test_dsl_script.cpp).
return scenario {
  name = "full",
  description = "every field set",
  model = model("llama-3-8b", {layers = 4, max_seq = 4096}),
  hardware = {
    "h100",
    hardware("A100-80GB", {memory_bytes = 40e9}),
    {name = "toy", peak_flops = {fp32 = 1e12, bf16 = 4e12}, memory_bytes = 8e9,
     memory_bandwidth = 1e11},
  },
  workload = decode { batch = 4, prompt = 256, new_tokens = 64, kv_cache = true },
  stacks = {
    step("baseline", "bf16"),
    step("+fa+graphs", "flash_attention", "cuda_graphs"),
    step("+batching", {batch = 16}),
    step("-kv", {kv_cache = false}),
  },
  execute = { enabled = true, layers = 2, repeats = 3, warmup = 2, min_time = 0.25 },
}
