// The optimization registry, validation of pass specs, and building a stack step's graph:
// workload passes, then the fp32 baseline, then graph passes in stack order.
#include "core/passes/passes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/passes/pass_impl.hpp"
#include "core/text.hpp"

namespace perfsim {

const std::vector<OptimizationInfo>& optimizations() {
  static const std::vector<OptimizationInfo> list = {
      {"fp32", "every op and tensor in fp32 (the baseline; drops mixed-precision master weights)",
       false, false},
      {"tf32", "fp32 GEMMs compute on tensor cores in tf32; storage stays fp32", false, false},
      {"bf16", "ops and tensors in bf16; training keeps fp32 master weights and AdamW states",
       false, false},
      {"fp16", "ops and tensors in fp16; training keeps fp32 master weights and AdamW states",
       false, false},
      {"fp8", "linear-layer GEMMs compute in fp8; inference stores their weights in fp8", false,
       false},
      {"flash_attention",
       "scores -> softmax -> context (and backward) fused into one op; S and P never stored",
       false, false},
      {"paged_kv",
       "KV cache in pages of N rows (default 16) via a block table; holds only the filled pages "
       "(needs flash_attention)",
       false, false},
      {"fusion", "each residual add merged with the norm that reads it (add_rmsnorm/add_layernorm)",
       false, false},
      {"cuda_graphs", "launches replayed from a captured CUDA graph (lower per-op launch cost)",
       false, false},
      {"fused_optimizer", "per-tensor multi-pass AdamW ops become one single-pass AdamW op", false,
       false},
      {"recompute",
       "activation checkpointing: each layer's forward reruns in backward; only layer inputs saved",
       false, false},
      {"pinned_memory",
       "host input buffers are page-locked: uploads skip the driver's staging copy (host_data)",
       false, false},
      {"prefetch",
       "the next step's inputs upload on a copy stream during compute, into a second buffer "
       "(needs pinned_memory)",
       false, false},
      {"kv_cache", "decode reuses cached K/V (1) or recomputes the whole context each step (0)",
       false, true},
      {"batch", "sets the batch size (sequences, or the training micro-batch)", true, true},
      {"dp", "data-parallel replicas (parallel.dp)", true, false, true},
      {"tp", "tensor-parallel ranks: Megatron splits of attention and MLP (parallel.tp)", true, false,
       true},
      {"pp", "pipeline stages (parallel.pp)", true, false, true},
      {"cp", "context-parallel ranks: ring attention over the sequence (parallel.cp)", true, false,
       true},
      {"ep", "expert-parallel ranks of a mixture-of-experts model (parallel.ep)", true, false, true},
      {"sp", "sequence parallelism beside tensor parallelism: 1 on, 0 off (parallel.sp)", true, false,
       true},
      {"zero", "ZeRO stage 0-3 over the data-parallel ranks; 3 is FSDP's full_shard (parallel.zero)",
       true, false, true},
      {"interleave", "model chunks per pipeline stage, interleaved 1F1B (parallel.interleave)", true,
       false, true},
      // Serving knobs (serve{} workloads).
      {"scheduler",
       "serving: how requests are batched: static (wait for max_batch), dynamic (max_batch or "
       "max_wait, as Triton's), continuous (per engine step, as vLLM's)",
       true, false, false, true, "static|dynamic|continuous"},
      {"max_batch",
       "serving: sequences per batch (static, dynamic) or running at once (continuous; vLLM's "
       "max_num_seqs, default 256)",
       true, false, false, true},
      {"max_wait", "serving, dynamic batching: seconds the oldest request may wait for a fuller batch",
       true, false, false, true},
      {"preferred_batch", "serving, dynamic batching: dispatch at once when this many requests wait",
       true, false, false, true},
      {"max_tokens",
       "serving, continuous: tokens per engine step (vLLM's max_num_batched_tokens; default "
       "max(max_seq, 2048))",
       true, false, false, true},
      {"chunked_prefill",
       "serving, continuous: N tokens per engine step, decodes first, prompts split into chunks to "
       "fill the rest (Sarathi-Serve, vLLM's chunked prefill)",
       true, false, false, true},
      {"prefix_cache",
       "serving: full KV blocks named by a hash of their prefix are shared and kept (LRU) for "
       "later prompts (vLLM's automatic prefix caching; needs paged_kv)",
       false, false, false, true},
      {"preemption",
       "serving, continuous: when KV blocks run out the last admitted request is preempted: "
       "recompute (default) or swap (its blocks to host memory)",
       true, false, false, true, "recompute|swap"},
      {"gpu_memory",
       "serving: fraction of GPU memory for weights, activations and the KV pool (vLLM's "
       "gpu_memory_utilization, default 0.9)",
       true, false, false, true},
      {"kv_watermark",
       "serving: fraction of KV blocks kept free when admitting requests (vLLM's watermark, default "
       "0.01)",
       true, false, false, true},
  };
  return list;
}

namespace {

const OptimizationInfo* find_optimization(const std::string& name) {
  for (const auto& o : optimizations())
    if (o.name == name) return &o;
  return nullptr;
}

}  // namespace

bool is_serve_pass(const PassSpec& p) {
  const OptimizationInfo* info = find_optimization(p.name);
  return info != nullptr && info->serve_pass;
}

namespace {

std::vector<std::string> split_choices(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t bar = text.find('|', start);
    out.emplace_back(text.substr(start, bar - start));
    if (bar == std::string_view::npos) return out;
    start = bar + 1;
  }
}

// A serving knob's value: a word from its choices, a fraction, seconds or a count.
void validate_serve_pass(const PassSpec& p, const OptimizationInfo& info) {
  if (info.text_choices != nullptr) {
    const std::vector<std::string> choices = split_choices(info.text_choices);
    if (!p.text || std::find(choices.begin(), choices.end(), *p.text) == choices.end())
      throw ConfigError(fmt::format("optimization '{}' takes one of {} (e.g. {{{} = \"{}\"}}){}", p.name,
                                    fmt::join(choices, ", "), p.name, choices.front(),
                                    p.text ? fmt::format("; got '{}'{}", *p.text, did_you_mean(*p.text, choices))
                                           : std::string()));
    return;
  }
  if (p.text)
    throw ConfigError(fmt::format("optimization '{}' takes a number, not the word '{}'", p.name, *p.text));
  if (p.name == "prefix_cache") {
    if (p.value && *p.value != 1)
      throw ConfigError(fmt::format("optimization 'prefix_cache' takes no value (got {}); leave it out to disable it",
                                    *p.value));
    return;
  }
  if (!p.value) throw ConfigError(fmt::format("optimization '{}' needs a value (e.g. {{{} = ...}})", p.name, p.name));
  const double v = *p.value;
  if (p.name == "max_wait") {
    if (!(v >= 0 && v <= 3600))
      throw ConfigError(fmt::format("optimization 'max_wait' takes seconds from 0 to 3600 (got {})", v));
  } else if (p.name == "gpu_memory") {
    if (!(v > 0 && v <= 1))
      throw ConfigError(fmt::format("optimization 'gpu_memory' takes a fraction in (0, 1] (got {})", v));
  } else if (p.name == "kv_watermark") {
    if (!(v >= 0 && v < 1))
      throw ConfigError(fmt::format("optimization 'kv_watermark' takes a fraction in [0, 1) (got {})", v));
  } else if (!(v >= 1 && v <= (1 << 24)) || v != std::floor(v)) {
    throw ConfigError(fmt::format("optimization '{}' takes a whole number from 1 to {} (got {})", p.name, 1 << 24, v));
  }
}

}  // namespace

void validate(const PassSpec& p) {
  const OptimizationInfo* info = find_optimization(p.name);
  if (!info) {
    std::vector<std::string> names;
    for (const auto& o : optimizations()) names.push_back(o.name);
    throw ConfigError(fmt::format("unknown optimization '{}'{}", p.name, did_you_mean(p.name, names)));
  }
  if (info->serve_pass) {
    validate_serve_pass(p, *info);
    return;
  }
  if (p.text)
    throw ConfigError(fmt::format("optimization '{}' takes {} (got the word '{}')", p.name,
                                  info->needs_value ? "a number" : "no value", *p.text));
  if (p.name == "batch") {
    if (!p.value)
      throw ConfigError("optimization 'batch' needs a value (e.g. batch = 32)");
    const double v = *p.value;
    if (!(v > 0) || v != std::floor(v))
      throw ConfigError(fmt::format("optimization 'batch' needs a positive whole number (got {})", v));
  } else if (p.name == "kv_cache") {
    if (p.value && *p.value != 0 && *p.value != 1)
      throw ConfigError(fmt::format("optimization 'kv_cache' takes 0 (off) or 1 (on) (got {})", *p.value));
  } else if (p.name == "paged_kv") {
    if (p.value && (!(*p.value >= 1 && *p.value <= max_kv_block) || *p.value != std::floor(*p.value)))
      throw ConfigError(fmt::format(
          "optimization 'paged_kv' takes the rows per page, a whole number from 1 to {} (got {})",
          max_kv_block, *p.value));
  } else if (info->parallel_pass) {
    if (!p.value)
      throw ConfigError(fmt::format("optimization '{}' needs a value (e.g. {{{} = 2}})", p.name, p.name));
    const double v = *p.value;
    const double low = p.name == "zero" || p.name == "sp" ? 0 : 1;
    const double high = p.name == "zero" ? 3 : p.name == "sp" ? 1 : 1 << 20;
    if (!(v >= low && v <= high) || v != std::floor(v))
      throw ConfigError(fmt::format("optimization '{}' takes a whole number from {} to {} (got {})", p.name,
                                    low, high, v));
  } else if (p.value && *p.value != 1) {
    throw ConfigError(fmt::format(
        "optimization '{}' takes no value (got {}); leave it out of the step to disable it", p.name,
        *p.value));
  }
}

bool apply_workload_pass(const PassSpec& p, Workload& w) {
  validate(p);
  if (p.name == "batch") {
    w.batch = static_cast<int64_t>(*p.value);
    return true;
  }
  if (p.name == "kv_cache") {
    w.kv_cache = p.value.value_or(1) != 0;
    return true;
  }
  return false;
}

bool apply_parallel_pass(const PassSpec& pass, ParallelSpec& p) {
  const OptimizationInfo* info = find_optimization(pass.name);
  if (info == nullptr || !info->parallel_pass) return false;
  validate(pass);
  const int v = static_cast<int>(*pass.value);
  const std::string& n = pass.name;
  if (n == "dp") p.dp = v;
  else if (n == "tp") p.tp = v;
  else if (n == "pp") p.pp = v;
  else if (n == "cp") p.cp = v;
  else if (n == "ep") p.ep = v;
  else if (n == "sp") p.sp = v != 0;
  else if (n == "zero") p.zero = v;
  else if (n == "interleave") {
    p.interleave = v;
    // Several chunks make 1F1B interleaved, as pipeline_schedule() and the parallel table read
    // them; an explicit GPipe stays GPipe, which validate then refuses with interleave > 1.
    if (v > 1 && p.schedule == PipelineSchedule::one_f_one_b) p.schedule = PipelineSchedule::interleaved;
  }
  return true;
}

ParallelSpec step_parallel(const ParallelSpec& base, const std::vector<StackStep>& stack, std::size_t upto) {
  ParallelSpec p = base;
  for (std::size_t i = 0; i <= upto && i < stack.size(); ++i)
    for (const PassSpec& pass : stack[i].passes) (void)apply_parallel_pass(pass, p);
  return p;
}

void apply_graph_pass(const PassSpec& p, Graph& g) {
  validate(p);
  const std::string& n = p.name;
  if (n == "fp32") passes::set_precision(g, DType::fp32);
  else if (n == "bf16") passes::set_precision(g, DType::bf16);
  else if (n == "fp16") passes::set_precision(g, DType::fp16);
  else if (n == "tf32") passes::apply_tf32(g);
  else if (n == "fp8") passes::apply_fp8(g);
  else if (n == "flash_attention") passes::apply_flash_attention(g);
  else if (n == "paged_kv") passes::apply_paged_kv(g, static_cast<int64_t>(p.value.value_or(default_kv_block)));
  else if (n == "fusion") passes::apply_fusion(g);
  else if (n == "cuda_graphs") g.graphed = true;
  else if (n == "fused_optimizer") passes::apply_fused_optimizer(g);
  else if (n == "recompute") passes::apply_recompute(g);
  else if (n == "pinned_memory") passes::apply_pinned_memory(g);
  else if (n == "prefetch") passes::apply_prefetch(g);
  // batch and kv_cache act on the workload before building.
}

Graph build_stack_graph(const ModelConfig& m, const Workload& w,
                        const std::vector<StackStep>& stack, std::size_t upto,
                        const BuildOptions& o) {
  if (stack.empty()) {
    Graph g = build_graph(m, w, o);
    g.check();
    return g;
  }
  if (upto >= stack.size())
    throw std::out_of_range(
        fmt::format("stack step {} requested but the stack has {} steps", upto, stack.size()));
  Workload wl = w;
  for (std::size_t i = 0; i <= upto; ++i)
    for (const PassSpec& p : stack[i].passes) (void)apply_workload_pass(p, wl);
  Graph g = build_graph(m, wl, o);
  for (std::size_t i = 0; i <= upto; ++i) {
    for (const PassSpec& p : stack[i].passes) apply_graph_pass(p, g);
    g.applied.push_back(stack[i].name);
  }
  g.check();
  return g;
}

}  // namespace perfsim
