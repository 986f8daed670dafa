-- Inference of a tiny ResNet on the CPU: bf16, then conv+BN(+ReLU) folded by the fusion pass.
return scenario { model = model("tiny-resnet"), hardware = "H100-SXM", workload = prefill { batch = 4 },
                  stacks = { step("bf16", "bf16"), step("+fusion", "fusion") },
                  execute = { repeats = 3, warmup = 1 } }
