-- Context parallelism on 2 CPU ranks on a GPT-style model: learned positions looked up at the
-- rank's chunks of each sequence, LayerNorm, GELU and tied embeddings; checked by mpi_step_check
-- against one rank's step over the whole sequences.
return scenario {
  model = model "tiny-gpt", hardware = "H100-SXM",
  workload = train { batch = 2, seq = 32 },
  parallel = { cp = 2 },
  stacks = { step("cp2 gpt", {}) },
}
