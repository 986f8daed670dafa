-- CLI test fixture: prefetch without pinned_memory before it. The error names this file, the
-- line of the step and what to change.
return scenario {
  name = "prefetch_pageable",
  model = model("tiny-llama"),
  hardware = {"H100-SXM"},
  workload = train { batch = 2, seq = 64 },
  host_data = true,
  stacks = {
    step("baseline", "bf16"),
    step("+prefetch", "prefetch"),
  },
}
