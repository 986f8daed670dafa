-- kind is "transformer" or "cnn".
return scenario { model = model { kind = "rnn", layers = 2 }, hardware = "H100-SXM", workload = train { batch = 2 } }
