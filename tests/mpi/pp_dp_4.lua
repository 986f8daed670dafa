-- Pipeline × data parallelism on 4 CPU ranks (2 stages, each over 2 data-parallel ranks), with
-- DDP and with ZeRO-1, checked by mpi_step_check against one rank's step over the whole batch.
return scenario {
  model = model "tiny-llama", hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16 },
  parallel = { pp = 2, dp = 2 },
  stacks = { step("pp2 dp2", {}), step("pp2 dp2 zero1", {zero = 1}) },
}
