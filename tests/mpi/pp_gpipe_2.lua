-- The GPipe schedule on 2 CPU ranks: 3 micro-batches of tiny-llama, every forward before every
-- backward, checked by mpi_step_check against one rank's step over the whole batch.
return scenario {
  model = model "tiny-llama", hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16, grad_accum = 3 },
  parallel = { pp = 2, schedule = "gpipe" },
  stacks = { step("pp2 gpipe m3", {}) },
}
