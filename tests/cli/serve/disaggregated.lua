-- Prefill and decode on separate engines (1P1D), the KV sent after the prefill, then layer by
-- layer, against one engine.
return scenario {
  model = "tiny-llama", hardware = "H100-SXM",
  workload = serve { requests = 12, arrivals = poisson { rate = 20 }, prompt = 48, output = 6 },
  stacks = {
    step("one engine", "bf16", "flash_attention", "paged_kv", {gpu_memory = 0.01}),
    step("1P1D", {prefill_engines = 1, decode_engines = 1}),
    step("1P1D layerwise", {kv_transfer = "layerwise"}),
  },
}
