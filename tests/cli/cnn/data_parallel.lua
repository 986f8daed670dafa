-- Image models run on one GPU for now.
return scenario { model = model("resnet-50"), hardware = "H100-SXM", workload = train { batch = 32 },
                  parallel = { dp = 2 } }
