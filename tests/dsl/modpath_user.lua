-- Fixture: uses a model that only the module-path override of models.lua defines.
return scenario {
  model = model("mine"),
  hardware = "L4",
  workload = prefill { batch = 1, prompt = 16 },
}
