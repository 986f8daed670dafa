-- TensorRT-LLM performance overview, Llama 3.1 8B FP8 on one H200: input 1000 / output 1000
-- tokens, 3,000 requests (the page's request count for these lengths), output tokens/s.
return require("lib.cases").trtllm_8b {
  hardware = "H200", tag = "h200", input = 1000, output = 1000, requests = 3000, tokens = 17744,
}
