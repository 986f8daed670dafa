-- model{kind = "cnn"} needs its stages.
return scenario { model = model { kind = "cnn", name = "my-cnn", image = 64 }, hardware = "H100-SXM",
                  workload = train { batch = 2 } }
