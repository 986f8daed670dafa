-- execute.layers samples transformer layers: an image model refuses it.
return scenario { model = model("resnet-50"), hardware = "H100-SXM", workload = train { batch = 8 },
                  execute = { layers = 2 } }
