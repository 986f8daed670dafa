-- Prefill and decode on separate CPU ranks (1P1D, perfsim run --gpus 2 --backend cpu): rank 0
-- prefills every request and sends each prompt's KV pages to rank 1, which decodes them; rank 0
-- reports the service, each engine and the transfers, predicted and measured.
return scenario {
  name = "serve_pd_2",
  model = "tiny-llama", hardware = "H100-SXM",
  workload = serve {
    requests = 16, seed = 9,
    arrivals = poisson { rate = 400 },
    prompt = lengths { dist = "uniform", min = 16, max = 64 },
    output = lengths { dist = "uniform", min = 4, max = 12 },
  },
  stacks = {
    step("1P1D", "flash_attention", "paged_kv", {scheduler = "continuous", prefill_engines = 1, decode_engines = 1}),
  },
}
