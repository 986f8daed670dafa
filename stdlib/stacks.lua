-- stacks.lua: named optimization stacks (scripts use them as `stacks.decode_classic`).
-- Each is a cumulative list of steps; optimization names are checked against the C++ passes
-- (perfsim.optimizations()) when the steps are built.
return {
  -- The classic serving stack for one decode step.
  decode_classic = {
    step("baseline", "bf16"),
    step("+flash_attention", "flash_attention"),
    step("+cuda_graphs", "cuda_graphs"),
    step("+fp8", "fp8"),
    step("+batching", {batch = 32}),
    step("+paged_kv", "paged_kv"),
  },
  -- The classic single-GPU training stack, from an fp32 baseline.
  train_classic = {
    step("baseline fp32"),
    step("+bf16 AMP", "bf16"),
    step("+fused_optimizer", "fused_optimizer"),
    step("+fusion", "fusion"),
    step("+recompute", "recompute"),
  },
}
