-- Image models are laid out by data parallelism only: tensor parallelism is refused.
return scenario { model = model("resnet-50"), hardware = "H100-SXM", workload = train { batch = 32 },
                  parallel = { dp = 2, tp = 2 } }
