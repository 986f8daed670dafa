-- ResNet-50 training on ImageNet-sized images (224×224, NHWC): one step of forward, backward and
-- AdamW over a batch of images, from fp32 to bf16 mixed precision, a fused optimizer and CUDA
-- graphs; throughput in images/s. Predicted only for now (the GPU backend's convolutions are
-- still to come); `--backend cpu --set model=tiny-resnet --set batch=4` executes a tiny ResNet on
-- this machine's CPU.
--   perfsim run scenarios/resnet50_train.lua
--   perfsim run scenarios/resnet50_train.lua --set batch=256
local opt = options {
  model = {"image model from the zoo (perfsim list models: resnet-18 ... resnet-152, tiny-resnet)", "resnet-50"},
  batch = {"images a step", 32},
}

return scenario {
  name = "resnet50_train",
  description = "ResNet training step, fp32 to bf16 AMP, fused AdamW and CUDA graphs",
  model = model(opt.model),
  hardware = {"H100-SXM", "H200", "A100-80GB"},
  workload = train { batch = opt.batch },
  stacks = {
    step("fp32"),
    step("+bf16 AMP", "bf16"),
    step("+fused_optimizer", "fused_optimizer"),
    step("+cuda_graphs", "cuda_graphs"),
  },
  execute = { repeats = 3, warmup = 1 },
}
