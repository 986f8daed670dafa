-- Expert × tensor parallelism on 4 CPU ranks (tp = 2 inside, dp = 2 across with ep = 2: each
-- tp pair holds 4 of tiny-moe's 8 experts, each expert's width split over the pair), with and
-- without sequence parallelism, checked by mpi_step_check against one rank's step over the whole
-- batch (fp32). capacity_factor = experts / top_k = 4: no token is dropped (ep_steps_2.lua says
-- why that matters).
return scenario {
  model = model("tiny-moe", {capacity_factor = 4}), hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16 },
  parallel = { tp = 2, dp = 2, ep = 2 },
  stacks = {
    step("ep2 tp2", {}),
    step("ep2 tp2 +sp", {sp = true}),
  },
}
