-- Mixtral 8x7B training on 64 H100s (8 nodes of 8 GPUs): where do the experts go? The 46.7B
-- parameters (12.9B active a token) do not fit a GPU with their optimizer state, so the first
-- step splits every layer over a node (tensor parallel with sequence parallelism) and shards
-- AdamW over the replicas (ZeRO-1). Expert parallelism then gives each GPU of a node one of the
-- eight experts instead. Spreading them over two nodes (tp = 2, ep = 8) pays with all-to-alls
-- over InfiniBand; a pipeline of two stages with ep = 4 inside a node keeps them on NVLink; ep = 8
-- in a node with the dense layers unsplit is fastest but does not fit until the activations are
-- recomputed.
local opt = options {
  seq  = {"tokens per sequence", 4096},
  accum = {"micro-batches per step (one sequence each)", 16},
}

return scenario {
  name = "train_moe",
  description = "Mixtral 8x7B training on 64 GPUs: tensor vs expert parallelism",
  model = model("mixtral-8x7b"),
  hardware = "H100-SXM",
  workload = train { batch = 1, seq = opt.seq, grad_accum = opt.accum },
  parallel = { gpus = 64, tp = 8, sp = true, zero = 1 },
  stacks = {
    step("tp8 zero1", "bf16", "flash_attention"),
    step("ep8 over 2 nodes", {tp = 2, ep = 8, dp = 32}),
    step("ep4 pp2", {pp = 2, ep = 4, dp = 16}),
    step("ep8 in a node", {tp = 1, sp = 0, pp = 1, ep = 8, dp = 64}),
    step("+recompute", "recompute"),
  },
  execute = { enabled = false },
}
