-- Tensor-parallel steps mpi_step_check runs on 2 CPU ranks and compares with one rank's step:
-- Megatron's column/row splits with the vocabulary-parallel embedding and loss, then with
-- sequence parallelism (tiny-gpt, fp32).
return scenario {
  model = model "tiny-gpt", hardware = "H100-SXM",
  workload = train { batch = 2, seq = 16 },
  parallel = { tp = 2 },
  stacks = {
    step("tp", {}),
    step("tp+sp", {sp = true}),
  },
}
