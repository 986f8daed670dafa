-- Tensor × data parallelism on 4 CPU ranks (tp = 2 inside, dp = 2 across), with and without
-- sequence parallelism, checked by mpi_step_check against one rank's step over the whole batch.
return scenario {
  model = model "tiny-gpt", hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16 },
  parallel = { tp = 2, dp = 2 },
  stacks = {
    step("tp2 dp2", {}),
    step("tp2 dp2 +sp", {sp = true}),
  },
}
