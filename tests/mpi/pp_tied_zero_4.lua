-- A pipeline of tiny-gpt (tied embeddings: the edge stages all-reduce the table's gradient) over
-- 2 data-parallel ranks with ZeRO-1 on 4 CPU ranks, one micro-batch and two: the tied all-reduce
-- runs on the gradient shards, after the reduce-scatters. Checked by mpi_step_check.
return scenario {
  model = model "tiny-gpt", hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16 },
  parallel = { pp = 2, dp = 2 },
  stacks = { step("pp2 dp2 tied zero1", {zero = 1}) },
}
