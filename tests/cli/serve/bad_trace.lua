return scenario {
  model = "tiny-llama", hardware = "H100-SXM",
  workload = serve { requests = 10, arrivals = trace "bad_trace.jsonl" },
  stacks = { step("bf16", "bf16") },
}
