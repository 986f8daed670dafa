-- The data-parallel steps mpi_step_check runs on CPU ranks and compares with one rank's step
-- over the whole batch: DDP, ZeRO-1, -2, -3, in fp32.
return scenario {
  model = model "tiny-gpt", hardware = "H100-SXM",
  workload = train { batch = 2, seq = 16 },
  parallel = { dp = 2 },
  stacks = {
    step("ddp", {}),
    step("zero1", {zero = 1}),
    step("zero2", {zero = 2}),
    step("zero3", {zero = 3}),
  },
}
