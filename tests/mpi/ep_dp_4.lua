-- Expert parallelism inside data parallelism on 4 CPU ranks (dp = 4, ep = 2: ranks 0 and 1 split
-- tiny-moe's experts, as do ranks 2 and 3, and each expert's gradient is averaged over the two
-- ranks holding it), with DDP, ZeRO-1 and ZeRO-3 (an expert's training state sharded over those
-- two ranks: a flat part of the rank's experts), checked by mpi_step_check against one rank's
-- step over the whole batch (fp32). capacity_factor = experts / top_k = 4: no token is dropped
-- (ep_steps_2.lua says why that matters).
return scenario {
  model = model("tiny-moe", {capacity_factor = 4}), hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16 },
  parallel = { dp = 4, ep = 2 },
  stacks = {
    step("ep2 dp4", {}),
    step("ep2 dp4 zero1", {zero = 1}),
    step("ep2 dp4 zero3", {zero = 3}),
  },
}
