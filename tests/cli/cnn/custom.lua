-- A custom image model: a ResNet-26-like network at 128×128, inference and training.
local net = model { kind = "cnn", name = "resnet-26-128", image = 128, classes = 100,
                    stages = { {2, 64, 1}, {2, 128, 2}, {2, 256, 2}, {2, 512, 2} } }
return scenario { model = net, hardware = "H100-SXM", workload = prefill { batch = 64 },
                  stacks = { step("fp32"), step("+bf16", "bf16") } }
