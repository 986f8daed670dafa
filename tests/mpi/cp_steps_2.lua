-- Context parallelism on 2 CPU ranks: ring attention over the load-balanced chunks of every
-- sequence (rank 0 holds chunks 0 and 3 of 4, rank 1 chunks 1 and 2) on a llama-style model
-- (rotary positions of the rank's chunks, grouped KV heads), then with full recompute (the
-- forward ring rerun in backward); checked by mpi_step_check against one rank's step over the
-- whole sequences.
return scenario {
  model = model "tiny-llama", hardware = "H100-SXM",
  workload = train { batch = 2, seq = 32 },
  parallel = { cp = 2 },
  stacks = {
    step("cp2", {}),
    step("cp2 +recompute", "recompute"),
  },
}
