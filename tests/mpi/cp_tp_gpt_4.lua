-- Context × tensor parallelism on 4 CPU ranks on a GPT-style model: cp = 2 × tp = 2, the
-- vocabulary-parallel embedding adding the learned positions of the rank's chunks, with and
-- without sequence parallelism; checked by mpi_step_check against one rank's step.
return scenario {
  model = model "tiny-gpt", hardware = "H100-SXM",
  workload = train { batch = 1, seq = 32 },
  parallel = { cp = 2, tp = 2 },
  stacks = {
    step("cp2 tp2 gpt", {}),
    step("cp2 tp2 gpt +sp", {sp = true}),
  },
}
