-- Context parallelism beside data and tensor parallelism on 4 CPU ranks: cp = 2 × dp = 2 (DDP,
-- then ZeRO-1: gradients averaged over the 4 ranks that hold the same weights), then cp = 2 ×
-- tp = 2 with and without sequence parallelism; checked by mpi_step_check against one rank's
-- step over the whole batch.
return scenario {
  model = model "tiny-llama", hardware = "H100-SXM",
  workload = train { batch = 1, seq = 32 },
  parallel = { cp = 2, dp = 2 },
  stacks = {
    step("cp2 dp2", {}),
    step("cp2 dp2 zero1", {zero = 1}),
    step("cp2 tp2", {tp = 2, dp = 1, zero = 0}),
    step("cp2 tp2 +sp", {sp = true}),
  },
}
