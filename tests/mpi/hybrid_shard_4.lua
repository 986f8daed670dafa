-- FSDP hybrid_shard on 4 CPU ranks as two nodes of 2: the weights and optimizer state sharded
-- within a node, the gradient shards all-reduced across the two (mpi_step_check).
return scenario {
  model = model "tiny-gpt", hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16 },
  parallel = { dp = 4, fsdp = "hybrid_shard" },
  stacks = { step("hybrid_shard", {}) },
}
