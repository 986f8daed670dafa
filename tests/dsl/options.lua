-- Fixture: declared options of every type, used by the scenario.
local opt = options {
  model  = {"model from the zoo", "tiny-llama"},
  batch  = {"sequences decoded together", 1},
  layers = {"transformer layers to execute (0 = all)", 1},
  graphs = {"add the cuda_graphs step", true},
}
local steps = { step("baseline", "bf16") }
if opt.graphs then steps[#steps + 1] = step("+cuda_graphs", "cuda_graphs") end
return scenario {
  name = "options",
  model = model(opt.model),
  hardware = "H100-SXM",
  workload = decode { batch = opt.batch, prompt = 32, new_tokens = 16 },
  stacks = steps,
  execute = { layers = opt.layers },
}
