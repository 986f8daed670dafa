-- Five requests from a trace on a model of max_seq 256: the third (300 + 8 tokens) is refused,
-- the others share a 32-token prefix or not.
return scenario {
  model = "tiny-llama", hardware = "H100-SXM",
  workload = serve { requests = 5, arrivals = trace "trace.jsonl", slo = { ttft = 0.001 } },
  stacks = {
    step("static", "bf16", "flash_attention", {scheduler = "static", max_batch = 2}),
    step("+continuous", {scheduler = "continuous"}, "paged_kv"),
    step("+prefix_cache", "prefix_cache"),
  },
}
