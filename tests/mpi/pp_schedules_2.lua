-- Pipeline schedules on 2 CPU ranks: 4 micro-batches through 2 stages of tiny-gpt in the 1F1B
-- order (each micro-batch's copy of the stage's passes, sends and receives paired between the
-- stages, gradients accumulated, one optimizer step), with and without recomputation, checked
-- by mpi_step_check against one rank's step over the whole batch. pp_gpipe_2.lua: GPipe.
return scenario {
  model = model "tiny-gpt", hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16, grad_accum = 4 },
  parallel = { pp = 2 },
  stacks = { step("pp2 1f1b m4", {}), step("+recompute", "recompute") },
}
