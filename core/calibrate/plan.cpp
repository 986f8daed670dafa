// The calibration sweeps per backend and mode. GEMM axes follow the doubling series
// 320·2^i (off the validation models' 1024/4096/14336 sizes) plus a vocabulary-sized n;
// the calibration models use hidden sizes 1280/2560/3584 on a GPU (192..640 on a CPU) and
// vocabularies 32001 (odd, as GPT-2's 50257) and 65536 (4000..12000 on a CPU).
#include "core/calibrate/plan.hpp"

namespace perfsim {

namespace {

ModelConfig llama_like(const char* name, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t ffn,
                       int64_t vocab) {
  ModelConfig m;
  m.name = name;
  m.layers = 4;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.ffn_hidden = ffn;
  m.vocab = vocab;
  m.max_seq = 16384;
  m.activation = Activation::swiglu;
  m.norm = NormKind::rmsnorm;
  m.rope = true;
  return m;
}

ModelConfig gpt_like(const char* name, int64_t hidden, int64_t heads, int64_t vocab, int64_t max_seq) {
  ModelConfig m;
  m.name = name;
  m.layers = 4;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = vocab;
  m.max_seq = max_seq;
  m.activation = Activation::gelu;
  m.norm = NormKind::layernorm;
  m.tied_embeddings = true;
  m.bias = true;
  return m;
}

Workload decode(int64_t batch, int64_t context) {
  Workload w;
  w.phase = Phase::decode;
  w.batch = batch;
  w.new_tokens = 2;
  w.prompt = context - 1;  // decode_context() = prompt + new_tokens / 2 = context
  return w;
}

// A speculative decode step: one verify pass of `drafts` + 1 rows a sequence.
Workload verify(int64_t batch, int64_t context, int64_t drafts) {
  Workload w = decode(batch, context);
  w.draft_tokens = drafts;
  w.acceptance = 0.5;  // prices the yield only; the pass is the same at any acceptance
  return w;
}

Workload prefill(int64_t batch, int64_t seq) {
  Workload w;
  w.phase = Phase::prefill;
  w.batch = batch;
  w.prompt = seq;
  return w;
}

Workload train(int64_t batch, int64_t seq) {
  Workload w;
  w.phase = Phase::train;
  w.batch = batch;
  w.seq = seq;
  return w;
}

std::vector<StackStep> stack_of(std::initializer_list<const char*> passes) {
  std::vector<StackStep> s;
  for (const char* p : passes) s.push_back(StackStep{std::string("+") + p, {PassSpec{p, std::nullopt}}, ""});
  if (s.empty()) s.push_back(StackStep{"fp32", {}, ""});
  return s;
}

// Every (model, workload) pair with the fp32 baseline, bf16 and the bf16 + flash + fusion
// stacks (training adds the fused optimizer); the optimized inference stack is also run eagerly.
void add_cases(std::vector<KernelCase>& out, const std::vector<ModelConfig>& models,
               const std::vector<Workload>& workloads, bool with_plain_bf16, bool eager_pairs) {
  for (const ModelConfig& m : models)
    for (const Workload& w : workloads) {
      const bool tr = w.phase == Phase::train;
      out.push_back({m, w, stack_of({}), false});
      if (with_plain_bf16) out.push_back({m, w, stack_of({"bf16"}), eager_pairs});
      out.push_back({m, w,
                     tr ? stack_of({"bf16", "flash_attention", "fusion", "fused_optimizer"})
                        : stack_of({"bf16", "flash_attention", "fusion"}),
                     eager_pairs});
    }
}

// Decode steps with the KV cache paged (16-row pages, shuffled through the pool): the paged
// append and attention kernels get curves of their own. They run on the models and contexts
// the contiguous decode curve is fitted on: the split-KV kernel's efficiency also depends on
// the GQA group (one pass over K/V for up to 4 query rows, more passes beyond), so a paged
// curve from other groups would price the same kernel off by the difference.
void add_paged_cases(std::vector<KernelCase>& out, const std::vector<ModelConfig>& models,
                     const std::vector<Workload>& workloads) {
  for (const ModelConfig& m : models)
    for (const Workload& w : workloads)
      out.push_back({m, w, stack_of({"bf16", "flash_attention", "paged_kv", "fusion"}), false});
}

// Decode steps of one model through the optimized bf16 stack only (graph-replayed): its
// flash attention points fill the decode curve of its GQA group.
void add_decode_cases(std::vector<KernelCase>& out, const ModelConfig& m, const std::vector<Workload>& workloads) {
  for (const Workload& w : workloads) out.push_back({m, w, stack_of({"bf16", "flash_attention", "fusion"}), false});
}

CalibrationPlan cuda_plan(bool quick) {
  CalibrationPlan p;
  p.mode = quick ? "quick" : "full";
  p.run = RunOptions{1, 5, 42, false, 0, {}};
  p.graph_mode = true;
  GemmSweepPlan& g = p.gemm;
  if (quick) {
    g.dtypes = {DType::fp32, DType::bf16};
    g.m = {1, 8, 64, 512, 4096};
    g.n = {320, 1280, 5120, 20480, 163840};
    g.k = {320, 1280, 5120, 20480};
    g.max_cell_flops = 500e9;
  } else {
    // fp16 runs the bf16 tensor-core path at the same peak: it gets a GEMM curve from the
    // calibration models' graphs. fp8 has its own, smaller grid (below).
    // tf32 (a compute mode no shipped stack uses) is left to the class medians: the full
    // calibration stays within five minutes on an H100.
    g.dtypes = {DType::fp32, DType::bf16};
    // Rows double all the way: a GEMM's efficiency bends as it saturates, and a wider step
    // under-reads it between points (fp32 4096-row GEMMs by 15-20% over 2048..8192).
    g.m = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
    g.n = {320, 640, 1280, 2560, 5120, 10240, 20480, 40960, 163840};
    g.k = {320, 640, 1280, 2560, 5120, 10240, 20480};
    g.max_cell_flops = 300e9;  // 0.3 ms at the H100's bf16 peak, 4.5 ms at its fp32 peak
  }
  // Cells past these budgets run at the efficiency of their largest measured neighbour
  // (large GEMMs are saturated); the first run of each shape also pays cuBLASLt autotuning.
  g.max_cell_bytes = 0.5 * (1ull << 30);
  g.max_graph_bytes = 8.0 * (1ull << 30);
  // fp8: the skinny decode rows densely, weights up to 256 MiB (the host quantizes each). A
  // memory-bound GEMM's efficiency climbs with its weight's size and bends: a coarse grid
  // under-reads it between points.
  GemmSweepPlan& f = p.fp8_gemm;
  f.dtypes = {DType::fp8};
  f.m = quick ? std::vector<int64_t>{1, 16, 256} : std::vector<int64_t>{1, 16, 64, 256, 2048};
  f.n = quick ? std::vector<int64_t>{1280, 5120, 20480} : std::vector<int64_t>{1280, 2560, 5120, 10240, 20480, 65536};
  f.k = quick ? std::vector<int64_t>{1280, 5120} : std::vector<int64_t>{1280, 2560, 5120, 20480};
  f.max_cell_flops = g.max_cell_flops;
  f.max_cell_bytes = (quick ? 128.0 : 256.0) * (1 << 20);
  f.max_graph_bytes = 2.0 * (1ull << 30);
  // Unaligned GEMMs (odd n or k: lm_head over an odd vocabulary, its dgrad): the grid's cells
  // with an odd axis. The budget reaches the size of a training lm_head (4096 x 50257 x 1024).
  GemmSweepPlan& u = p.unaligned_gemm;
  u.dtypes = {DType::fp32, DType::bf16};
  u.m = quick ? std::vector<int64_t>{16, 2048} : std::vector<int64_t>{1, 16, 256, 2048, 8192};
  u.n = quick ? std::vector<int64_t>{2560, 32001} : std::vector<int64_t>{2560, 5121, 32001};
  // Aligned k beside the odd ones: an odd n alone (a tied lm_head's forward) over weights of
  // 82 to 524 MB, where its memory-bound efficiency still climbs.
  u.k = quick ? std::vector<int64_t>{1280, 32001} : std::vector<int64_t>{1280, 2560, 5121, 8192, 32001};
  u.max_cell_flops = 1e12;
  u.max_cell_bytes = g.max_cell_bytes;
  u.max_graph_bytes = g.max_graph_bytes;

  const ModelConfig a = llama_like("cal-llama-2560", 2560, 20, 4, 6912, 65536);
  // An odd vocabulary, as GPT-2's 50257: its lm_head GEMMs (forward, dgrad, wgrad) are unaligned.
  const ModelConfig gpt = gpt_like("cal-gpt-1280", 1280, 20, 32001, 8192);
  if (quick) {
    // The plain bf16 stack too: materialized attention at bf16 (its fp32 curves price bf16
    // kernels only roughly), and training at 2 x 1024, so the backward norms and attention reach
    // ordinary training sizes instead of being held at a short sequence's efficiency.
    add_cases(p.kernels, {a, gpt}, {decode(1, 512), decode(16, 2048), prefill(1, 1536), train(2, 1024)},
              true, true);
    add_paged_cases(p.kernels, {a, gpt}, {decode(1, 512), decode(16, 2048)});
    const ModelConfig g4 = llama_like("cal-llama-2048-g4", 2048, 16, 4, 5632, 16384);
    add_decode_cases(p.kernels, g4, {decode(1, 512), decode(16, 2048)});
  } else {
    const ModelConfig c = llama_like("cal-llama-3584", 3584, 28, 4, 9600, 65536);
    add_cases(p.kernels, {a, c, gpt},
              {decode(1, 256), decode(8, 1536), decode(32, 6144), prefill(2, 2560), train(2, 768)},
              true, true);
    add_paged_cases(p.kernels, {a, c, gpt}, {decode(8, 1536), decode(32, 6144)});
    add_paged_cases(p.kernels, {a, gpt}, {decode(1, 256)});
    // GQA groups of 4 (Llama-3's): the decode kernel's third family (decode_rows_variant);
    // and a group-of-5 step between decode 1×256 and 8×1536, where that curve bends. The
    // split-KV kernel launches splits × KV heads × batch CTAs, about 4 per SM or more: up to
    // 32 sequences of 4 KV heads that is 4-5 per SM; 64 of them (or Llama-3-8B's 32 of 8 KV
    // heads) take 3 splits, 6 per SM, whose efficiency the points around it do not give
    // (Llama-3-8B at batch 32 ran at 0.59 of its roofline, read as 0.49 between them).
    const ModelConfig g4 = llama_like("cal-llama-2048-g4", 2048, 16, 4, 5632, 16384);
    // Verify passes of 4 drafted tokens (20 rows a KV head: decode_qn) from one sequence to 256,
    // and 128 sequences decoding, where the packed kernel's tiles fill the GPU several times.
    add_decode_cases(p.kernels, g4,
                     {decode(1, 512), decode(4, 768), decode(8, 1536), decode(16, 3072), decode(32, 6144),
                      decode(64, 1536), decode(128, 1536), verify(1, 1024, 4), verify(16, 1536, 4), verify(64, 1024, 4),
                      verify(256, 1024, 4)});
    add_decode_cases(p.kernels, a, {decode(4, 768)});
    // Materialized and flash attention backward at a longer training sequence: their curves
    // would otherwise end at 2 x 768. Materialized attention (fp32 and bf16) between that and
    // the prefill's 2 x 2560, where its efficiency climbs fastest.
    add_cases(p.kernels, {gpt}, {train(4, 2048)}, true, false);
    p.kernels.push_back({gpt, train(3, 1280), stack_of({}), false});
    p.kernels.push_back({gpt, train(3, 1280), stack_of({"bf16"}), false});
    p.kernels.push_back({gpt, prefill(3, 1536), stack_of({"bf16"}), false});
    // Llama-like training at 2 x 2048: RMSNorm, RoPE and SwiGLU backward, GQA flash attention
    // backward and the cross-entropy would otherwise end at 2 x 768's sizes (RMSNorm backward
    // at 33 MB of traffic, where its efficiency still climbs), short of ordinary training steps.
    // The optimized stack only: the plain bf16 one added materialized GQA attention scores at a
    // length whose per-call efficiency differs from the other points of the same call size
    // (the scores curve's error tripled offline), and a second embedding point to one bin.
    p.kernels.push_back({a, train(2, 2048), stack_of({"bf16", "flash_attention", "fusion", "fused_optimizer"}), false});
    // An untied model over an odd vocabulary: its lm_head's forward, dgrad and wgrad have other
    // layouts and unaligned operands than the tied GPT's (gemm_layout_variant).
    const ModelConfig odd = llama_like("cal-llama-1280-odd", 1280, 10, 2, 3456, 32001);
    p.kernels.push_back({odd, train(2, 768), stack_of({}), false});
    p.kernels.push_back({odd, train(2, 768), stack_of({"bf16"}), false});
    p.kernels.push_back({odd, train(3, 1280), stack_of({"bf16"}), false});
    p.kernels.push_back({odd, decode(4, 1536), stack_of({"bf16"}), false});
    // Short prompts: KV appends, RoPE and norms between a decode step's sizes and 2 x 2560's.
    for (const ModelConfig& m : {a, c}) p.kernels.push_back({m, prefill(1, 640), stack_of({"bf16"}), false});
    // One-sequence prompts whose K and V appends (3 and 6 MB) are one contiguous copy each
    // (copy_rows_variant): the appends of the prompts above span 2 sequences or stay under 1.5 MB.
    p.kernels.push_back({a, prefill(1, 3072), stack_of({"bf16", "flash_attention", "fusion"}), false});
    p.kernels.push_back({c, prefill(1, 6144), stack_of({"bf16", "flash_attention", "fusion"}), false});
    // The fp8 stack's other kernels (quantized activations, fp8 KV paths) at model sizes.
    // Untied models only: a tied lm_head re-quantizes the embedding table at every call.
    for (const ModelConfig& m : {a, c})
      for (const Workload& w : {decode(1, 256), decode(4, 1536), decode(16, 1536), prefill(2, 2560)})
        p.kernels.push_back({m, w, stack_of({"bf16", "fp8", "flash_attention", "fusion"}), false});
  }
  // Quantized weights (their GEMMs' own curves: "int4w", "int8w" up to quantized_fused_rows
  // rows, "int4w_dq", "int8w_dq" beyond, and W8A8's int8 GEMMs): decode steps on both sides of
  // the fused kernel's limit and a prompt, on the untied models (a tied lm_head keeps bf16).
  {
    const std::vector<Workload> weight_only =
        quick ? std::vector<Workload>{decode(1, 512), decode(16, 2048), prefill(1, 1536)}
              : std::vector<Workload>{decode(1, 256), decode(4, 768), decode(8, 1536), decode(16, 1536),
                                      decode(32, 1536), prefill(2, 2560)};
    const std::vector<Workload> w8a8 = quick ? std::vector<Workload>{decode(1, 512), prefill(1, 1536)}
                                             : std::vector<Workload>{decode(1, 256), decode(16, 1536), prefill(2, 2560)};
    const std::vector<ModelConfig> models =
        quick ? std::vector<ModelConfig>{a} : std::vector<ModelConfig>{a, llama_like("cal-llama-3584", 3584, 28, 4, 9600, 65536)};
    for (const ModelConfig& m : models) {
      for (const char* format : {"int4_weights", "int8_weights"})
        for (const Workload& w : weight_only)
          p.kernels.push_back({m, w, stack_of({"bf16", "flash_attention", "fusion", format}), false});
      for (const Workload& w : w8a8)
        p.kernels.push_back({m, w, stack_of({"bf16", "flash_attention", "fusion", "w8a8"}), false});
    }
  }
  // An fp8 KV cache's kernels (their own curves, "..._fp8kv"): decode over a contiguous and a
  // paged cache, for GQA groups of 5 and 1 (the decode kernel's row families), and a prompt
  // appended to one.
  {
    const std::vector<Workload> fp8_decodes =
        quick ? std::vector<Workload>{decode(1, 512), decode(16, 2048)}
              : std::vector<Workload>{decode(1, 256), decode(8, 1536), decode(32, 6144)};
    for (const ModelConfig& m : {a, gpt})
      for (const Workload& w : fp8_decodes) {
        p.kernels.push_back({m, w, stack_of({"bf16", "flash_attention", "fp8_kv", "fusion"}), false});
        p.kernels.push_back({m, w, stack_of({"bf16", "flash_attention", "paged_kv", "fp8_kv", "fusion"}), false});
      }
    p.kernels.push_back({a, prefill(1, 1536), stack_of({"bf16", "flash_attention", "fp8_kv", "fusion"}), false});
  }
  // The serving engine's decode attention (its varlen kernel over pages, another kernel than
  // the split-KV one the paged cases time) for GQA groups of 5, 4 and 1, at a 16-bit and an fp8
  // cache: from one short sequence to 128 of them, as a busy engine's decode steps run.
  {
    const ModelConfig g4 = llama_like("cal-llama-2048-g4", 2048, 16, 4, 5632, 16384);
    const std::vector<std::pair<int64_t, int64_t>> steps =
        quick ? std::vector<std::pair<int64_t, int64_t>>{{1, 512}, {16, 2048}}
              : std::vector<std::pair<int64_t, int64_t>>{{1, 256}, {1, 4096}, {4, 1536}, {8, 768}, {16, 3072},
                                                         {32, 1536}, {64, 1024}, {128, 1536}};
    // Multi-head KV (Llama-2-7B's group of 1) on a rotary model: the engine runs no learned positions.
    const ModelConfig mha = llama_like("cal-llama-2048-mha", 2048, 16, 16, 5632, 16384);
    // A group of 4 over 28 query heads: the kernel runs a block per sequence and query head, so
    // at equal bytes a model of 32 heads (Llama-3-8B) fills the GPU better than the 16-head
    // model above (its curve priced a served Llama-3-8B's decode steps 15% slow on H200s).
    const ModelConfig g4_wide = llama_like("cal-llama-3584-g4", 3584, 28, 7, 9600, 16384);
    const std::vector<ModelConfig> models =
        quick ? std::vector<ModelConfig>{a, mha} : std::vector<ModelConfig>{a, g4, g4_wide, mha};
    for (const ModelConfig& m : models)
      for (const bool fp8 : {false, true})
        for (const auto& [seqs, context] : steps) p.engine_attention.push_back({m, seqs, context, fp8});
  }
  // From 4 KiB: token uploads are a few KiB, and the latency is the fit's intercept.
  p.copy_bytes = quick ? std::vector<double>{4 << 10, 64 << 10, 1 << 20, 16 << 20, 128 << 20}
                       : std::vector<double>{4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20,
                                             256 << 20};
  p.collectives = {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                   Collective::all_to_all, Collective::send_recv};
  p.collective_bytes = quick ? std::vector<double>{8 << 10, 1 << 20, 64 << 20, 256 << 20}
                             : std::vector<double>{8 << 10, 64 << 10, 512 << 10, 4 << 20, 32 << 20, 256 << 20, 1 << 30};
  return p;
}

CalibrationPlan cpu_plan(bool quick) {
  CalibrationPlan p;
  p.mode = quick ? "quick" : "full";
  p.run = RunOptions{1, 5, 42, false, 0, {}};
  p.graph_mode = false;
  GemmSweepPlan& g = p.gemm;
  g.dtypes = {DType::fp32, DType::bf16};
  if (quick) {
    g.m = {1, 4, 16, 64, 256, 1024};
    g.n = {160, 640, 2560, 10240};
    g.k = {160, 640, 2560};
    // 4 ms at the estimated roofline admits the grid's largest skinny cells (1 × 10240 × 2560,
    // 52 MB in bf16), which a 2 ms cap left to be filled from smaller ones: a CPU reads small
    // weights at lower rates (8 MB at 18 GB/s, 50 MB at 25 GB/s on a 2-core EPYC), so decode
    // GEMMs were priced near twice too slow. Costs about a second.
    g.max_roofline_seconds = 4e-3;
  } else {
    g.m = {1, 2, 4, 8, 16, 32, 64, 128, 512, 2048};
    g.n = {160, 320, 640, 1280, 2560, 5120, 10240, 40960};
    g.k = {160, 320, 640, 1280, 2560, 5120};
    g.max_roofline_seconds = 4e-3;
  }
  g.max_cell_bytes = 64.0 * (1 << 20);
  g.max_graph_bytes = 256.0 * (1 << 20);
  p.launch_chain_ops = 200;
  const ModelConfig a = llama_like("cal-llama-384", 384, 6, 2, 1024, 8000);
  const ModelConfig gpt = gpt_like("cal-gpt-320", 320, 5, 6000, 2048);
  if (quick) {
    add_cases(p.kernels, {a, gpt},
              {decode(1, 192), decode(8, 768), prefill(1, 384), prefill(2, 96), train(1, 192)}, true, false);
    add_paged_cases(p.kernels, {a}, {decode(8, 768)});
  } else {
    const ModelConfig b = llama_like("cal-llama-640", 640, 10, 2, 1728, 12000);
    const ModelConfig c = llama_like("cal-llama-192", 192, 6, 2, 512, 4000);
    add_cases(p.kernels, {a, b, c, gpt},
              {decode(1, 96), decode(4, 384), decode(16, 1536), decode(32, 160), prefill(1, 192), prefill(2, 768),
               train(1, 96), train(2, 384)},
              true, false);
    add_paged_cases(p.kernels, {a, b}, {decode(4, 384), decode(16, 1536)});
  }
  p.copy_skip_reason = "the CPU backend's device is host memory: no host link to fit";
  return p;
}

}  // namespace

CalibrationPlan make_calibration_plan(const std::string& backend, bool quick) {
  return backend == "cuda" ? cuda_plan(quick) : cpu_plan(quick);
}

}  // namespace perfsim
