-- TensorRT-LLM performance overview, Llama 3.1 8B FP8 on one H100-SXM: input 1000 / output 1000
-- tokens, 3,000 requests (the page's request count for these lengths), output tokens/s.
return require("lib.cases").trtllm_8b {
  hardware = "H100-SXM", tag = "h100", input = 1000, output = 1000, requests = 3000, tokens = 15220,
}
