-- Recomputation rewrites transformer layers: an image model refuses it.
return scenario { model = model("tiny-resnet"), hardware = "H100-SXM", workload = train { batch = 2 },
                  stacks = { step("fp32"), step("+recompute", "recompute") } }
