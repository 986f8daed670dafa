-- A pipeline of 2 stages on 2 CPU ranks (one micro-batch: forward through both, backward back),
-- on tiny-gpt (tied embeddings: both edge stages hold the table and all-reduce its gradient) and
-- checked by mpi_step_check against one rank's step.
return scenario {
  model = model "tiny-gpt", hardware = "H100-SXM",
  workload = train { batch = 2, seq = 16 },
  parallel = { pp = 2 },
  stacks = { step("pp2", {}) },
}
