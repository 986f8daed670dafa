-- TensorRT-LLM performance overview, Llama 3.1 8B FP8 on one H100-SXM: input 2048 / output 2048
-- tokens, 1,500 requests (the page's request count for these lengths), output tokens/s.
return require("lib.cases").trtllm_8b {
  hardware = "H100-SXM", tag = "h100", input = 2048, output = 2048, requests = 1500, tokens = 9305,
}
