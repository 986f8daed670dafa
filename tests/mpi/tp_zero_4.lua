-- ZeRO over tensor-parallel ranks on 4 CPU ranks: tp = 2 × dp = 2, the optimizer state (ZeRO-1),
-- the gradients (ZeRO-2) and the weights (ZeRO-3) of each tensor-parallel slice sharded over the
-- data-parallel ranks (Megatron's distributed optimizer), checked by mpi_step_check against one
-- rank's unsharded step.
return scenario {
  model = model "tiny-gpt", hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16 },
  parallel = { tp = 2, dp = 2 },
  stacks = { step("tp2 dp2 zero1", {zero = 1}), step("zero2", {zero = 2}), step("zero3", {zero = 3}),
             step("+sp", {sp = 1}) },
}
