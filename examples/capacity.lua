-- How many GPUs does a 7B chat model need for 1,000 concurrent users? perfsim.capacity answers
-- by simulation: it searches the most closed-loop users (each sends its next request as soon
-- as its last one completes, after `think` seconds) one GPU serves within the SLO, and the
-- highest Poisson request rate it sustains, each run the serving engine's predicted steps. The
-- rule of thumb engineers use stands beside it: KV memory bounds the requests in flight, and a
-- decode step reads the weights once. Prices: stdlib/hardware.lua's on-demand list prices.
local opt = options {
  model = {"model (the zoo's Llama 2 7B)", "llama-2-7b"},
  hardware = {"GPU", "A100-80GB"},
  users = {"concurrent users to serve", 1000},
  think = {"seconds a user waits between a reply and the next request", 0},
  prompt = {"mean prompt tokens (lognormal)", 1024},
  output = {"mean output tokens (lognormal)", 256},
  ttft = {"SLO: seconds to the first token", 1.0},
  tpot = {"SLO: seconds per output token after the first", 0.05},
  requests = {"requests per simulated run", 300},
}

-- A plain script: the scenario's fields as a table, no scenario{} call.
local base = {
  model = model(opt.model),
  hardware = opt.hardware,
  workload = serve {
    requests = opt.requests, seed = 1,
    arrivals = poisson { rate = 1 },  -- the rate search replaces the rate; the users search the arrivals
    prompt = lengths { dist = "lognormal", mean = opt.prompt, max = 3 * opt.prompt },
    output = lengths { dist = "lognormal", mean = opt.output, max = 4 * opt.output },
    slo = { ttft = opt.ttft, tpot = opt.tpot },
  },
  stacks = {
    step("vLLM-like", "bf16", "flash_attention", "paged_kv", "cuda_graphs",
         {scheduler = "continuous", chunked_prefill = 512}),
  },
}

local users = perfsim.capacity { scenario = base, users = opt.users, think = opt.think }
local rate = perfsim.capacity { scenario = base }
local rule = users.rule_of_thumb

local function commas(n)
  local s = string.format("%.0f", n)
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end
local function ms(seconds)
  if seconds >= 1 then return string.format("%.2f s", seconds) end
  return string.format("%.0f ms", seconds * 1e3)
end
local function dollars(x) return x > 0 and string.format("$%.2f", x) or "-" end

print(string.format("How many %s GPUs serve %s to %s concurrent users? (predicted, one GPU per replica)",
                    users.hardware, users.model, commas(opt.users)))
print(string.format("  traffic  prompts lognormal mean %s tokens (max %s), outputs lognormal mean %s (max %s); %d requests a run",
                    commas(opt.prompt), commas(3 * opt.prompt), commas(opt.output), commas(4 * opt.output), opt.requests))
print(string.format("  SLO      TTFT <= %s and TPOT <= %s for %.0f%% of requests, none rejected", ms(opt.ttft), ms(opt.tpot),
                    100 * users.slo.attainment))
print("  engine   " .. users.step .. ": bf16, flash attention, paged KV, CUDA graphs, continuous batching, 512-token prefill chunks")
print(string.format("  price    %s per GPU-hour (on-demand list price, stdlib/hardware.lua)", dollars(users.price_per_hour)))

print()
print(string.format("%s concurrent users, think %g s:", commas(opt.users), opt.think))
print(string.format("  %-14s  %9s  %5s  %13s  %16s", "", "users/GPU", "GPUs", "out tok/s/GPU", "$ per M out tok"))
-- The rule of thumb's tokens/s counts the KV reads (decode_tokens_per_s_kv).
print(string.format("  %-14s  %9d  %5d  %13s  %16s", "simulation", users.users_per_replica, users.replicas,
                    commas(users.tokens_per_s), dollars(users.cost_per_million_tokens)))
print(string.format("  %-14s  %9d  %5d  %13s  %16s", "rule of thumb", rule.users_per_gpu, rule.gpus,
                    commas(rule.decode_tokens_per_s_kv),
                    dollars(users.price_per_hour / (rule.decode_tokens_per_s_kv * 3600) * 1e6)))
print("  · " .. users.note)

print()
print("Highest Poisson request rate one GPU sustains within the SLO:")
print(string.format("  simulation     %.2f requests/s, %s output tokens/s, %s per million output tokens", rate.max_rate,
                    commas(rate.tokens_per_s), dollars(rate.cost_per_million_tokens)))
print(string.format("  rule of thumb  %.2f requests/s (%s output tokens/s)", rule.requests_per_s_kv,
                    commas(rule.decode_tokens_per_s_kv)))
print("  · " .. rate.note)
print(string.format("  %12s  %9s  %9s  %8s", "rate (req/s)", "TTFT p99", "TPOT p99", "SLO met"))
for _, p in ipairs(rate.tried) do
  local rate_text = p.probe and "all at once" or string.format("%.2f", p.rate)
  print(string.format("  %12s  %9s  %9s  %7.1f%%  %s", rate_text, ms(p.ttft_p99), ms(p.tpot_p99), 100 * p.slo_attainment,
                      p.probe and "saturation probe" or (p.meets and "meets" or "misses")))
end

print()
print("The rule of thumb (core/serve/capacity.hpp):")
print(string.format("  KV per request   %.0f MB  = %.0f KB/token × (%.0f prompt + %.0f output tokens)",
                    rule.kv_bytes_per_request / 1e6, rule.kv_bytes_per_token / 1e3, rule.mean_prompt, rule.mean_output))
print(string.format("  concurrency      %d  = %.1f GB free for KV / KV per request (max %d sequences)", rule.concurrency,
                    rule.kv_budget_bytes / 1e9, rule.max_concurrent))
print(string.format("  decode step      %.1f ms  = %.1f GB of weights / bandwidth; %s output tokens/s over %d sequences",
                    rule.decode_step_time * 1e3, rule.weight_bytes / 1e9, commas(rule.decode_tokens_per_s), rule.concurrency))
print(string.format("  with KV reads    %.1f ms  (+ each sequence's context read every step): %s output tokens/s",
                    rule.decode_step_time_kv * 1e3, commas(rule.decode_tokens_per_s_kv)))
print("What it leaves out, the simulation prices: prefill chunks sharing the steps with decodes, queues,")
print("and a latency bound on every request.")
