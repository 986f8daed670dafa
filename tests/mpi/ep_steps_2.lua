-- Expert parallelism on 2 CPU ranks (dp = 2, each rank holding 4 of tiny-moe's 8 experts and
-- routing its own tokens), with DDP, ZeRO-1 and ZeRO-3 (the dense weights sharded; each expert,
-- held by one rank, stays whole), checked by mpi_step_check against one rank's step over the
-- whole batch (fp32). capacity_factor = experts / top_k = 4 gives each expert's buffer a row for
-- every token, so no token is dropped, neither by a rank nor by the reference over twice the
-- tokens (dropping would follow each rank's own token order, not the whole batch's).
return scenario {
  model = model("tiny-moe", {capacity_factor = 4}), hardware = "H100-SXM",
  workload = train { batch = 2, seq = 16 },
  parallel = { dp = 2, ep = 2 },
  stacks = {
    step("ep2", {}),
    step("ep2 zero1", {zero = 1}),
    step("ep2 zero3", {zero = 3}),
  },
}
