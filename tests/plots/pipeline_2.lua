-- Charts test fixture: a pipeline of 2 stages of tiny-gpt, two stack steps. Predicted only
-- (--backend none) the per-rank chart shows each stage; on 2 CPU ranks (--gpus 2 --backend cpu)
-- each rank's measured step and exposed communication beside its stage's prediction.
return scenario {
  name = "pipeline_2",
  model = model "tiny-gpt",
  hardware = "H100-SXM",
  workload = train { batch = 2, seq = 16 },
  parallel = { pp = 2 },
  stacks = { step("pp2", {}), step("+bf16", "bf16") },
  execute = { repeats = 2, warmup = 1 },
}
