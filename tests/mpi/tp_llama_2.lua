-- Tensor parallelism on a llama-style model (RMSNorm, SwiGLU, rotary, grouped KV heads) on 2
-- CPU ranks, with and without sequence parallelism, checked by mpi_step_check.
return scenario {
  model = model "tiny-llama", hardware = "H100-SXM",
  workload = train { batch = 2, seq = 16 },
  parallel = { tp = 2 },
  stacks = {
    step("tp", {}),
    step("tp+sp", {sp = true}),
  },
}
