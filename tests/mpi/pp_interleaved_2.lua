-- The interleaved schedule on 2 CPU ranks: a 4-layer GPT as 2 stages × 2 model chunks (stage 0
-- holds layers 0 and 2, stage 1 layers 1 and 3), 4 micro-batches in Megatron's interleaved 1F1B
-- order, activations passed around the ring (stage 1's first chunk feeds stage 0's second) and
-- gradients back the same way, the tied embedding's gradient all-reduced between the stages.
-- With and without recomputation; checked by mpi_step_check against one rank's step.
local m = model { name = "gpt-4-layers", layers = 4, hidden = 64, heads = 4, ffn_hidden = 256, vocab = 256,
                  max_seq = 256 }
return scenario {
  model = m, hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16, grad_accum = 4 },
  parallel = { pp = 2, interleave = 2, schedule = "interleaved" },
  stacks = { step("pp2 v2 m4", {}), step("+recompute", "recompute") },
}
