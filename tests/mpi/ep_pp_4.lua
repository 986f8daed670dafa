-- Expert parallelism within each stage of a pipeline on 4 CPU ranks (pp = 2, dp = 2 with ep = 2:
-- the two data-parallel ranks of a stage split its layer's experts), 1F1B over 2 micro-batches,
-- with DDP and ZeRO-1, checked by mpi_step_check against one rank's step over the whole batch
-- (fp32). capacity_factor = experts / top_k = 4: no token is dropped (ep_steps_2.lua says why
-- that matters).
return scenario {
  model = model("tiny-moe", {capacity_factor = 4}), hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16, grad_accum = 2 },
  parallel = { pp = 2, dp = 2, ep = 2 },
  stacks = {
    step("ep2 pp2 m2", {}),
    step("ep2 pp2 m2 zero1", {zero = 1}),
  },
}
