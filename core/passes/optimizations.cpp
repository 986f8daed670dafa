// The optimization table: one entry per optimization with its name, summary, kind, the value it
// takes and its apply function. validate() and the apply_* functions (passes.cpp) read only this.
#include <fmt/format.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/passes/pass_impl.hpp"
#include "core/passes/passes.hpp"

namespace perfsim {

namespace {

constexpr double unbounded = std::numeric_limits<double>::infinity();

ValueRange whole_numbers(double low, double high) {
  return {.low = low, .high = high, .text = fmt::format("takes a whole number from {} to {}", low, high)};
}

OptimizationInfo entry(std::string name, std::string summary, OptimizationKind kind, PassApply apply) {
  OptimizationInfo o;
  o.name = std::move(name);
  o.summary = std::move(summary);
  o.kind = kind;
  o.apply = apply;
  return o;
}

// One maker per kind, each taking that kind's function type, so an entry's kind and its apply
// function always agree.
OptimizationInfo graph_pass(std::string name, std::string summary, GraphPassFn apply, PassValue value = PassValue::none,
                            ValueRange range = {}) {
  OptimizationInfo o = entry(std::move(name), std::move(summary), OptimizationKind::graph, apply);
  o.value = value;
  o.range = std::move(range);
  return o;
}

// A graph pass that may take one of `choices` (recompute = "selective"); named alone it is the
// first.
OptimizationInfo graph_choice(std::string name, std::string summary, GraphPassFn apply,
                              std::vector<std::string> choices) {
  OptimizationInfo o = graph_pass(std::move(name), std::move(summary), apply, PassValue::optional);
  o.choices = std::move(choices);
  return o;
}

OptimizationInfo workload_pass(std::string name, std::string summary, WorkloadPassFn apply, PassValue value,
                               ValueRange range, std::string example = {}) {
  OptimizationInfo o = entry(std::move(name), std::move(summary), OptimizationKind::workload, apply);
  o.value = value;
  o.range = std::move(range);
  o.example = std::move(example);
  return o;
}

// Always given, as a whole number from `low` to `high`.
OptimizationInfo parallel_pass(std::string name, std::string summary, ParallelPassFn apply, double low = 1,
                               double high = 1 << 20) {
  OptimizationInfo o = entry(std::move(name), std::move(summary), OptimizationKind::parallel, apply);
  o.value = PassValue::required;
  o.range = whole_numbers(low, high);
  o.example = fmt::format("{{{} = 2}}", o.name);
  return o;
}

// A serving knob has no apply function: core/serve/scheduler_config.cpp reads it off the stack.
OptimizationInfo serve_knob(std::string name, std::string summary, ValueRange range = whole_numbers(1, 1 << 24)) {
  OptimizationInfo o = entry(std::move(name), std::move(summary), OptimizationKind::serve, {});
  o.value = PassValue::required;
  o.range = std::move(range);
  o.example = fmt::format("{{{} = ...}}", o.name);
  return o;
}

// A serving knob that takes one of `choices` (scheduler = "static").
OptimizationInfo serve_choice(std::string name, std::string summary, std::vector<std::string> choices) {
  OptimizationInfo o = serve_knob(std::move(name), std::move(summary));
  o.choices = std::move(choices);
  return o;
}

// A serving knob that is on when named.
OptimizationInfo serve_switch(std::string name, std::string summary) {
  OptimizationInfo o = serve_knob(std::move(name), std::move(summary));
  o.value = PassValue::none;
  return o;
}

int whole(const PassSpec& p) { return static_cast<int>(*p.value); }

}  // namespace

const std::vector<OptimizationInfo>& optimizations() {
  static const std::vector<OptimizationInfo> list = {
      graph_pass("fp32", "every op and tensor in fp32 (the baseline; drops mixed-precision master weights)",
                 [](const PassSpec&, Graph& g) { passes::set_precision(g, DType::fp32); }),
      graph_pass("tf32", "fp32 GEMMs compute on tensor cores in tf32; storage stays fp32",
                 [](const PassSpec&, Graph& g) { passes::apply_tf32(g); }),
      graph_pass("bf16", "ops and tensors in bf16; training keeps fp32 master weights and AdamW states",
                 [](const PassSpec&, Graph& g) { passes::set_precision(g, DType::bf16); }),
      graph_pass("fp16", "ops and tensors in fp16; training keeps fp32 master weights and AdamW states",
                 [](const PassSpec&, Graph& g) { passes::set_precision(g, DType::fp16); }),
      graph_pass("fp8", "linear-layer GEMMs compute in fp8; inference stores their weights in fp8",
                 [](const PassSpec&, Graph& g) { passes::apply_fp8(g); }),
      graph_pass("int8_weights",
                 "inference: linear-layer weights stored in int8 with a bf16 scale per output channel; GEMMs "
                 "compute in the activations' type (W8A16): half of bf16's weight bytes",
                 [](const PassSpec&, Graph& g) { passes::apply_weight_only(g, 8, 0); }),
      graph_pass("int4_weights",
                 "inference: linear-layer weights stored in int4 with a bf16 scale and zero point per group of N "
                 "inputs (default 128, AWQ/GPTQ's layout); GEMMs compute in the activations' type (W4A16)",
                 [](const PassSpec& p, Graph& g) {
                   passes::apply_weight_only(g, 4, static_cast<int64_t>(p.value.value_or(default_quant_group)));
                 },
                 PassValue::optional,
                 {.low = 8, .high = 1 << 20, .text = "takes the inputs per scale group, a whole number from 8 up"}),
      graph_pass("w8a8",
                 "inference: linear-layer GEMMs compute in int8 on int8 weights (a scale per output channel) and "
                 "int8 activations (a scale per token), as SmoothQuant",
                 [](const PassSpec&, Graph& g) { passes::apply_w8a8(g); }),
      graph_pass("sparse_24",
                 "inference: linear-layer weights pruned 2:4 (half the values, 2-bit indices) and their GEMMs on "
                 "the sparse tensor cores (the hardware's sparse_speedup, 2x from Ampere on); predicted only",
                 [](const PassSpec&, Graph& g) { passes::apply_sparse_24(g); }),
      graph_pass("fp8_kv",
                 "inference: the KV cache stored in fp8 (e4m3, one scale per tensor): half the bytes per token, "
                 "twice the sequences (needs flash_attention)",
                 [](const PassSpec&, Graph& g) { passes::apply_fp8_kv(g); }),
      graph_pass("flash_attention",
                 "scores -> softmax -> context (and backward) fused into one op; S and P never stored",
                 [](const PassSpec&, Graph& g) { passes::apply_flash_attention(g); }),
      graph_pass("paged_kv",
                 "KV cache in pages of N rows (default 16) via a block table; holds only the filled pages "
                 "(needs flash_attention)",
                 [](const PassSpec& p, Graph& g) {
                   passes::apply_paged_kv(g, static_cast<int64_t>(p.value.value_or(default_kv_block)));
                 },
                 PassValue::optional,
                 {.low = 1,
                  .high = max_kv_block,
                  .text = fmt::format("takes the rows per page, a whole number from 1 to {}", max_kv_block)}),
      graph_pass("fusion", "each residual add merged with the norm that reads it (add_rmsnorm/add_layernorm)",
                 [](const PassSpec&, Graph& g) { passes::apply_fusion(g); }),
      graph_pass("cuda_graphs", "launches replayed from a captured CUDA graph (lower per-op launch cost)",
                 [](const PassSpec&, Graph& g) { g.graphed = true; }),
      graph_pass("fused_optimizer", "per-tensor multi-pass AdamW ops become one single-pass AdamW op",
                 [](const PassSpec&, Graph& g) { passes::apply_fused_optimizer(g); }),
      graph_choice("recompute",
                   "activation checkpointing: each layer's forward reruns in backward, only its input saved; "
                   "\"selective\": only the attention core (scores, softmax, context)",
                   [](const PassSpec& p, Graph& g) {
                     if (p.text && *p.text == "selective") passes::apply_selective_recompute(g);
                     else passes::apply_recompute(g);
                   },
                   {"full", "selective"}),
      graph_pass("pinned_memory",
                 "host input buffers are page-locked: uploads skip the driver's staging copy (host_data)",
                 [](const PassSpec&, Graph& g) { passes::apply_pinned_memory(g); }),
      graph_pass("prefetch",
                 "the next step's inputs upload on a copy stream during compute, into a second buffer "
                 "(needs pinned_memory)",
                 [](const PassSpec&, Graph& g) { passes::apply_prefetch(g); }),
      workload_pass("kv_cache", "decode reuses cached K/V (1) or recomputes the whole context each step (0)",
                    [](const PassSpec& p, Workload& w) { w.kv_cache = p.value.value_or(1) != 0; }, PassValue::optional,
                    {.low = 0, .high = 1, .text = "takes 0 (off) or 1 (on)"}),
      workload_pass(
          "batch", "sets the batch size (sequences, or the training micro-batch)",
          [](const PassSpec& p, Workload& w) { w.batch = static_cast<int64_t>(*p.value); }, PassValue::required,
          {.low = 0, .high = unbounded, .low_open = true, .text = "needs a positive whole number"}, "batch = 32"),
      parallel_pass("dp", "data-parallel replicas (parallel.dp)",
                    [](const PassSpec& p, ParallelSpec& s) { s.dp = whole(p); }),
      parallel_pass("tp", "tensor-parallel ranks: Megatron splits of attention and MLP (parallel.tp)",
                    [](const PassSpec& p, ParallelSpec& s) { s.tp = whole(p); }),
      parallel_pass("pp", "pipeline stages (parallel.pp)", [](const PassSpec& p, ParallelSpec& s) { s.pp = whole(p); }),
      parallel_pass("cp", "context-parallel ranks: ring attention over the sequence (parallel.cp)",
                    [](const PassSpec& p, ParallelSpec& s) { s.cp = whole(p); }),
      parallel_pass("ep", "expert-parallel ranks of a mixture-of-experts model (parallel.ep)",
                    [](const PassSpec& p, ParallelSpec& s) { s.ep = whole(p); }),
      parallel_pass(
          "sp", "sequence parallelism beside tensor parallelism: 1 on, 0 off (parallel.sp)",
          [](const PassSpec& p, ParallelSpec& s) { s.sp = whole(p) != 0; }, 0, 1),
      parallel_pass(
          "zero", "ZeRO stage 0-3 over the data-parallel ranks; 3 is FSDP's full_shard (parallel.zero)",
          [](const PassSpec& p, ParallelSpec& s) { s.zero = whole(p); }, 0, 3),
      parallel_pass("interleave", "model chunks per pipeline stage, interleaved 1F1B (parallel.interleave)",
                    [](const PassSpec& p, ParallelSpec& s) {
                      s.interleave = whole(p);
                      // Several chunks make 1F1B interleaved, as pipeline_schedule() and the parallel
                      // table read them; an explicit GPipe stays GPipe, which validate then refuses
                      // with interleave > 1.
                      if (s.interleave > 1 && s.schedule == PipelineSchedule::one_f_one_b)
                        s.schedule = PipelineSchedule::interleaved;
                    }),
      serve_choice("scheduler",
                   "serving: how requests are batched: static (wait for max_batch), dynamic (max_batch or "
                   "max_wait, as Triton's), continuous (per engine step, as vLLM's)",
                   {"static", "dynamic", "continuous"}),
      serve_knob("max_batch",
                 "serving: sequences per batch (static, dynamic) or running at once (continuous; vLLM's "
                 "max_num_seqs, default 256)"),
      serve_knob("max_wait", "serving, dynamic batching: seconds the oldest request may wait for a fuller batch",
                 {.low = 0, .high = 3600, .whole = false, .text = "takes seconds from 0 to 3600"}),
      serve_knob("preferred_batch", "serving, dynamic batching: dispatch at once when this many requests wait"),
      serve_knob("max_tokens",
                 "serving, continuous: tokens per engine step (vLLM's max_num_batched_tokens; default "
                 "max(max_seq, 2048))"),
      serve_knob("chunked_prefill",
                 "serving, continuous: N tokens per engine step, decodes first, prompts split into chunks to "
                 "fill the rest (Sarathi-Serve, vLLM's chunked prefill)"),
      serve_switch("prefix_cache",
                   "serving: full KV blocks named by a hash of their prefix are shared and kept (LRU) for "
                   "later prompts (vLLM's automatic prefix caching; needs paged_kv)"),
      serve_choice("preemption",
                   "serving, continuous: when KV blocks run out the last admitted request is preempted: "
                   "recompute (default) or swap (its blocks to host memory)",
                   {"recompute", "swap"}),
      serve_choice("router",
                   "serving, replicas (dp > 1): where each request goes: round_robin (default), least_outstanding "
                   "(fewest requests waiting or running), prefix (the replica caching most of its prompt, else "
                   "least_outstanding; needs prefix_cache)",
                   {"round_robin", "least_outstanding", "prefix"}),
      serve_knob("prefill_engines",
                 "serving, disaggregated (xPyD): engines that only prefill, each handing a request's KV blocks to a "
                 "decode engine (set decode_engines too; 0 = off)",
                 {.low = 0, .high = 4096, .text = "takes a whole number of engines from 0 to 4096"}),
      serve_knob("decode_engines",
                 "serving, disaggregated (xPyD): engines that decode the requests the prefill engines hand over "
                 "(set prefill_engines too; 0 = off)",
                 {.low = 0, .high = 4096, .text = "takes a whole number of engines from 0 to 4096"}),
      serve_choice("kv_transfer",
                   "serving, disaggregated: when a prompt's KV blocks go to the decode engine: after (the prompt's "
                   "prefill done, default) or layerwise (each layer's as it is computed, overlapping the prefill)",
                   {"after", "layerwise"}),
      // Workload passes: a decode step takes them (its verify pass); a serving engine reads them
      // off the stack too (core/serve/scheduler_config.cpp).
      workload_pass(
          "speculative",
          "decode and serving (continuous batching): decode speculatively, k draft tokens a step from n-gram "
          "prompt lookup, verified in one pass of k + 1 tokens per sequence (set acceptance too; 0 = off)",
          [](const PassSpec& p, Workload& w) { w.draft_tokens = static_cast<int64_t>(*p.value); }, PassValue::required,
          {.low = 0, .high = 16, .text = "takes the draft tokens a step, a whole number from 0 to 16"},
          "speculative = 4"),
      workload_pass(
          "acceptance",
          "speculative decoding: the chance each draft token is accepted (Leviathan et al.'s alpha; a decode step "
          "yields its expected tokens, a serving engine draws accepted lengths from it, seeded)",
          [](const PassSpec& p, Workload& w) { w.acceptance = *p.value; }, PassValue::required,
          {.low = 0, .high = 1, .low_open = true, .whole = false, .text = "takes a probability above 0 and at most 1"},
          "acceptance = 0.7"),
      serve_knob("gpu_memory",
                 "serving: fraction of GPU memory for weights, activations and the KV pool (vLLM's "
                 "gpu_memory_utilization, default 0.9)",
                 {.low = 0, .high = 1, .low_open = true, .whole = false, .text = "takes a fraction in (0, 1]"}),
      serve_knob("kv_watermark",
                 "serving: fraction of KV blocks kept free when admitting requests (vLLM's watermark, default "
                 "0.01)",
                 {.low = 0, .high = 1, .high_open = true, .whole = false, .text = "takes a fraction in [0, 1)"}),
  };
  return list;
}

}  // namespace perfsim
