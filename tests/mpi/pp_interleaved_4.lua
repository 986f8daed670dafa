-- The interleaved schedule on 4 CPU ranks: 2 stages × 2 chunks of a 4-layer GPT over 2 data-
-- parallel ranks, with DDP and with ZeRO-1 (a chunk's gradients are reduced once they are whole,
-- after its last micro-batch's backward). Checked by mpi_step_check against one rank's step;
-- pp4_interleaved_4.lua: 4 stages.
local m = model { name = "gpt-layers", layers = 4, hidden = 64, heads = 4, ffn_hidden = 256, vocab = 256,
                  max_seq = 256 }
return scenario {
  model = m, hardware = "H100-SXM",
  workload = train { batch = 2, seq = 16, grad_accum = 2 },
  parallel = { pp = 2, dp = 2, interleave = 2, schedule = "interleaved" },
  stacks = { step("pp2 v2 dp2", {}), step("pp2 v2 dp2 zero1", {zero = 1}) },
}
