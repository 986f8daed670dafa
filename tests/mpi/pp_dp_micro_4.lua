-- 1F1B over 2 micro-batches × data parallelism on 4 CPU ranks (2 stages, each over 2
-- data-parallel ranks), with DDP and with ZeRO-1: the gradients accumulate over the
-- micro-batches and are reduced once, after the last one's backward. Checked by mpi_step_check.
return scenario {
  model = model "tiny-llama", hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16, grad_accum = 2 },
  parallel = { pp = 2, dp = 2 },
  stacks = { step("pp2 dp2 m2", {}), step("pp2 dp2 m2 zero1", {zero = 1}) },
}
