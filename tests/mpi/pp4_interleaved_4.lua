-- The interleaved schedule on 4 CPU ranks, 4 stages × 2 chunks of an 8-layer GPT: virtual stage
-- k on stage k mod 4, 4 micro-batches; the ring's wrap edge joins stage 3 to stage 0. Checked by
-- mpi_step_check against one rank's step.
local m = model { name = "gpt-8-layers", layers = 8, hidden = 64, heads = 4, ffn_hidden = 256, vocab = 256,
                  max_seq = 256 }
return scenario {
  model = m, hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16, grad_accum = 4 },
  parallel = { pp = 4, interleave = 2, schedule = "interleaved" },
  stacks = { step("pp4 v2 m4", {}) },
}
