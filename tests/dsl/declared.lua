-- Fixture: scenarios declared by calling scenario{} without returning one; the last one wins.
scenario { name = "first", model = model("tiny-gpt"), hardware = "L4", workload = prefill { batch = 2, prompt = 64 } }
scenario { name = "second", model = model("tiny-llama"), hardware = "L4", workload = prefill { batch = 3, prompt = 32 } }
