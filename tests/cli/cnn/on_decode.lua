-- An image model cannot decode.
return scenario { model = model("resnet-50"), hardware = "H100-SXM", workload = decode { batch = 1 } }
