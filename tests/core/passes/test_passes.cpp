// Optimization passes: registry and validation, what each pass changes in the graph, and
// stacks built through build_stack_graph.
#include <doctest/doctest.h>

#include <optional>
#include <set>
#include <string>
#include <variant>

#include "approx.hpp"
#include "core/builders/builders.hpp"
#include "core/cost/formulas.hpp"
#include "core/cost/memory_model.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/passes/passes.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::test_models;

namespace {

Workload decode_w() {
  Workload w;
  w.phase = Phase::decode;
  w.batch = 2, w.prompt = 24, w.new_tokens = 8;
  return w;
}

Workload train_w(int64_t batch = 2, int64_t seq = 32) {
  Workload w;
  w.phase = Phase::train;
  w.batch = batch, w.seq = seq;
  return w;
}

Graph with(const ModelConfig& m, const Workload& w, std::vector<std::string> names,
           int64_t layers = 2) {
  std::vector<StackStep> stack;
  for (auto& n : names) stack.push_back({"+" + n, {{n, {}}}});
  return build_stack_graph(m, w, stack, stack.size() - 1, BuildOptions{layers});
}

int count_kind(const Graph& g, OpKind k) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == k;
  return n;
}

double role_bytes(const Graph& g, TensorRole r) {
  double b = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == r) b += t.bytes() * t.count;
  return b;
}

bool any_tensor_named_with(const Graph& g, const std::string& part) {
  for (const Tensor& t : g.tensors)
    if (t.name.find(part) != std::string::npos) return true;
  return false;
}

std::string config_error(const PassSpec& p) {
  try {
    validate(p);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("passes: registry names and validation") {
  std::set<std::string> names;
  for (const auto& o : optimizations()) {
    names.insert(o.name);
    CHECK_FALSE(o.summary.empty());
  }
  CHECK(names == std::set<std::string>{"fp32", "tf32", "bf16", "fp16", "fp8", "int8_weights", "int4_weights", "w8a8", "sparse_24", "fp8_kv", "flash_attention",
                                       "paged_kv", "fusion", "cuda_graphs", "fused_optimizer", "recompute",
                                       "pinned_memory", "prefetch", "kv_cache", "batch", "dp", "tp", "pp",
                                       "cp", "ep", "sp", "zero", "interleave", "scheduler", "max_batch", "max_wait", "preferred_batch", "max_tokens",
                   "chunked_prefill", "prefix_cache", "preemption", "gpu_memory", "kv_watermark", "router", "prefill_engines", "decode_engines", "kv_transfer", "speculative", "acceptance"});
  CHECK(config_error({"flash_atention", {}}) ==
        "unknown optimization 'flash_atention' (did you mean 'flash_attention'?)");
  CHECK(config_error({"batch", {}}).find("needs a value") != std::string::npos);
  CHECK_FALSE(config_error({"batch", 0.0}).empty());
  CHECK_FALSE(config_error({"batch", -4.0}).empty());
  CHECK_FALSE(config_error({"kv_cache", 2.0}).empty());
  CHECK_FALSE(config_error({"fusion", 0.0}).empty());
  CHECK(config_error({"batch", 32.0}).empty());
  CHECK(config_error({"kv_cache", 0.0}).empty());
  CHECK(config_error({"paged_kv", {}}).empty());
  CHECK(config_error({"paged_kv", 32.0}).empty());
  for (double bad : {0.0, -16.0, 2.5, 5000.0}) {
    CAPTURE(bad);
    CHECK(config_error({"paged_kv", bad}).find("rows per page, a whole number from 1 to 4096") != std::string::npos);
  }
}

namespace {

// A value the optimization takes: its range's lowest (or just above it), or its first word.
PassSpec valid_spec(const OptimizationInfo& o) {
  if (!o.choices.empty()) return {o.name, std::nullopt, o.choices.front()};
  if (o.value == PassValue::none) return {o.name};
  return {o.name, o.range.low_open ? o.range.low + 1 : o.range.low};
}

// True when `apply` holds a function of type Fn.
template <class Fn>
bool holds_function(const PassApply& apply) {
  const Fn* f = std::get_if<Fn>(&apply);
  return f != nullptr && *f != nullptr;
}

}  // namespace

TEST_CASE("passes: each optimization's apply function is the one its kind calls for") {
  for (const OptimizationInfo& o : optimizations()) {
    CAPTURE(o.name);
    CHECK(find_optimization(o.name) == &o);  // one entry per name
    switch (o.kind) {
      case OptimizationKind::graph: CHECK(holds_function<GraphPassFn>(o.apply)); break;
      case OptimizationKind::workload: CHECK(holds_function<WorkloadPassFn>(o.apply)); break;
      case OptimizationKind::parallel: CHECK(holds_function<ParallelPassFn>(o.apply)); break;
      // Read by core/serve; nothing here applies it.
      case OptimizationKind::serve: CHECK(std::holds_alternative<std::monostate>(o.apply)); break;
    }
    if (o.value != PassValue::none && o.choices.empty()) CHECK_FALSE(o.range.text.empty());
    if (o.value == PassValue::required && o.choices.empty()) CHECK_FALSE(o.example.empty());
    CHECK(config_error(valid_spec(o)).empty());
  }
}

TEST_CASE("passes: the apply functions dispatch by kind") {
  for (const OptimizationInfo& o : optimizations()) {
    CAPTURE(o.name);
    const PassSpec p = valid_spec(o);
    Workload w;
    ParallelSpec layout;
    CHECK(apply_workload_pass(p, w) == (o.kind == OptimizationKind::workload));
    CHECK(apply_parallel_pass(p, layout) == (o.kind == OptimizationKind::parallel));
    CHECK(is_kind(p, o.kind));
  }
  Workload w;
  CHECK(apply_workload_pass({"batch", 8.0}, w));
  CHECK(w.batch == 8);
  CHECK(apply_workload_pass({"kv_cache", 0.0}, w));
  CHECK_FALSE(w.kv_cache);
  CHECK_FALSE(is_kind({"no_such_pass"}, OptimizationKind::graph));
  CHECK(find_optimization("no_such_pass") == nullptr);
}

TEST_CASE("passes: a value outside its optimization's rule is named in the error") {
  CHECK(config_error({"fusion", 2.0}) ==
        "optimization 'fusion' takes no value (got 2); leave it out of the step to disable it");
  CHECK(config_error({"fusion", std::nullopt, "swap"}) == "optimization 'fusion' takes no value (got the word 'swap')");
  CHECK(config_error({"batch", std::nullopt, "x"}) == "optimization 'batch' takes a number (got the word 'x')");
  CHECK(config_error({"batch", 0.5}) == "optimization 'batch' needs a positive whole number (got 0.5)");
  CHECK(config_error({"kv_cache", 2.0}) == "optimization 'kv_cache' takes 0 (off) or 1 (on) (got 2)");
  CHECK(config_error({"sp", 2.0}) == "optimization 'sp' takes a whole number from 0 to 1 (got 2)");
  CHECK(config_error({"scheduler"}) ==
        "optimization 'scheduler' takes one of static, dynamic, continuous (e.g. {scheduler = \"static\"})");
  CHECK(config_error({"scheduler", std::nullopt, "statc"}) ==
        "optimization 'scheduler' takes one of static, dynamic, continuous (e.g. {scheduler = \"static\"}); got "
        "'statc' (did you mean 'static'?)");
  CHECK(config_error({"max_batch"}) == "optimization 'max_batch' needs a value (e.g. {max_batch = ...})");
  CHECK(config_error({"max_batch", 16777217.0}) ==
        "optimization 'max_batch' takes a whole number from 1 to 16777216 (got 16777217)");
  CHECK(config_error({"max_wait", 3601.0}) == "optimization 'max_wait' takes seconds from 0 to 3600 (got 3601)");
  CHECK(config_error({"max_wait", 0.5}).empty());
  CHECK(config_error({"gpu_memory", 0.0}) == "optimization 'gpu_memory' takes a fraction in (0, 1] (got 0)");
  CHECK(config_error({"gpu_memory", 1.0}).empty());
  CHECK(config_error({"kv_watermark", 1.0}) == "optimization 'kv_watermark' takes a fraction in [0, 1) (got 1)");
  CHECK(config_error({"prefix_cache", 2.0}) ==
        "optimization 'prefix_cache' takes no value (got 2); leave it out to disable it");
  CHECK(config_error({"prefix_cache", std::nullopt, "on"}) ==
        "optimization 'prefix_cache' takes a number, not the word 'on'");
}

TEST_CASE("passes: parallel passes change the step's layout, step by step") {
  CHECK(config_error({"tp", {}}) == "optimization 'tp' needs a value (e.g. {tp = 2})");
  CHECK(config_error({"zero", 4.0}) == "optimization 'zero' takes a whole number from 0 to 3 (got 4)");
  CHECK(config_error({"tp", 1.5}) == "optimization 'tp' takes a whole number from 1 to 1048576 (got 1.5)");
  CHECK(config_error({"sp", 1.0}).empty());
  ParallelSpec base;
  base.dp = 8;
  const std::vector<StackStep> stack = {{"bf16", {{"bf16", {}}}},
                                        {"+zero1", {{"zero", 1.0}}},
                                        {"+tp", {{"tp", 2.0}, {"sp", 1.0}}},
                                        {"+chunks", {{"pp", 2.0}, {"interleave", 2.0}}}};
  CHECK(step_parallel(base, stack, 0).zero == 0);
  CHECK(step_parallel(base, stack, 1).zero == 1);
  const ParallelSpec tp = step_parallel(base, stack, 2);
  CHECK(tp.tp == 2);
  CHECK(tp.sp);
  CHECK(tp.zero == 1);
  CHECK(tp.dp == 8);
  const ParallelSpec chunks = step_parallel(base, stack, 3);
  CHECK(chunks.schedule == PipelineSchedule::interleaved);
  CHECK(chunks.pipeline_schedule() == PipelineSchedule::interleaved);
  CHECK(chunks.gpus() == 32);
  // Chunks turn only 1F1B into interleaved: an explicit GPipe stays GPipe, which validate refuses
  // with interleave > 1, as it refuses the same table.
  ParallelSpec gpipe = base;
  gpipe.schedule = PipelineSchedule::gpipe;
  const ParallelSpec still = step_parallel(gpipe, stack, 3);
  CHECK(still.schedule == PipelineSchedule::gpipe);
  CHECK(still.pipeline_schedule() == PipelineSchedule::gpipe);
  CHECK(still.interleave == 2);
  Workload w = train_w();
  w.grad_accum = 4;
  try {
    validate(still, tiny_llama(), w);
    FAIL("GPipe with two chunks a stage was accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).rfind("parallel.interleave = 2 needs schedule = \"interleaved\"", 0) == 0);
  }
  // A parallel pass is no graph pass: the rank graph of one GPU is unchanged.
  CHECK(build_stack_graph(tiny_llama(), decode_w(), {{"x", {{"tp", 2.0}}}}, 0).ops.size() ==
        build_graph(tiny_llama(), decode_w()).ops.size());
}

TEST_CASE("passes: workload passes change the workload before building") {
  const std::vector<StackStep> stack = {{"baseline", {}},
                                        {"+batch", {{"batch", 16.0}}},
                                        {"no cache", {{"kv_cache", 0.0}}}};
  const Graph g1 = build_stack_graph(tiny_llama(), decode_w(), stack, 1);
  CHECK(g1.workload.batch == 16);
  CHECK(g1.applied == std::vector<std::string>{"baseline", "+batch"});
  const Graph g2 = build_stack_graph(tiny_llama(), decode_w(), stack, 2);
  CHECK_FALSE(g2.workload.kv_cache);
  CHECK(role_bytes(g2, TensorRole::kv_cache) == 0);
  CHECK_THROWS((void)build_stack_graph(tiny_llama(), decode_w(), stack, 3));
}

TEST_CASE("passes: bf16 halves weight bytes; inference has no master weights") {
  const Graph base = with(tiny_llama(), decode_w(), {"fp32"});
  const Graph bf16 = with(tiny_llama(), decode_w(), {"bf16"});
  CHECK(role_bytes(bf16, TensorRole::weight) == role_bytes(base, TensorRole::weight) / 2);
  CHECK(role_bytes(bf16, TensorRole::kv_cache) == role_bytes(base, TensorRole::kv_cache) / 2);
  CHECK(role_bytes(bf16, TensorRole::master_weight) == 0);
  for (const Op& op : bf16.ops) CHECK(op.dtype == DType::bf16);
  CHECK(bf16.tensors.front().dtype == DType::bf16);  // embedding table
  for (const Tensor& t : bf16.tensors)
    if (t.role == TensorRole::input) CHECK(t.dtype == DType::int32);
}

TEST_CASE("passes: bf16 training keeps fp32 masters and states; fp32 drops them again") {
  const ModelConfig m = tiny_llama();
  const Graph g = with(m, train_w(), {"bf16"});
  CHECK(role_bytes(g, TensorRole::master_weight) == 2 * role_bytes(g, TensorRole::weight));
  CHECK(role_bytes(g, TensorRole::gradient) == role_bytes(g, TensorRole::weight));
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::adamw) continue;
    REQUIRE(op.inputs.size() == 5);
    CHECK(g.tensor(op.inputs[0]).role == TensorRole::master_weight);
    CHECK(g.tensor(op.inputs[0]).dtype == DType::fp32);
    CHECK(g.tensor(op.inputs[2]).dtype == DType::fp32);  // m
    CHECK(g.tensor(op.inputs[4]).role == TensorRole::weight);
    CHECK(op.outputs.size() == 4);
    CHECK(g.tensor(op.inputs[0]).count == g.tensor(op.inputs[4]).count);
  }
  const Graph back = with(m, train_w(), {"bf16", "fp32"});
  CHECK(role_bytes(back, TensorRole::master_weight) == 0);
  CHECK(back.tensors.size() == with(m, train_w(), {"fp32"}).tensors.size());
  for (const Op& op : back.ops)
    if (op.kind == OpKind::adamw) CHECK(op.inputs.size() == 4);
}

TEST_CASE("passes: tf32 and fp8 change GEMM precision") {
  const Graph tf = with(tiny_llama(), decode_w(), {"tf32"});
  for (const Op& op : tf.ops) CHECK(op.dtype == (op.kind == OpKind::gemm ? DType::tf32 : DType::fp32));
  const Graph f8 = with(tiny_llama(), decode_w(), {"bf16", "fp8"});
  for (const Op& op : f8.ops) {
    CHECK(op.dtype == (op.kind == OpKind::gemm ? DType::fp8 : DType::bf16));
    if (op.kind == OpKind::gemm) CHECK(f8.tensor(op.inputs[1]).dtype == DType::fp8);
  }
  CHECK(f8.tensors.front().dtype == DType::bf16);  // the embedding table is read by the lookup
  const Graph t8 = with(tiny_llama(), train_w(), {"bf16", "fp8"});
  CHECK(role_bytes(t8, TensorRole::weight) == role_bytes(with(tiny_llama(), train_w(), {"bf16"}), TensorRole::weight));
}

TEST_CASE("passes: flash_attention removes the score and probability tensors") {
  const Graph base = with(tiny_llama(), decode_w(), {"fp32"}, 0);
  const Graph g = with(tiny_llama(), decode_w(), {"flash_attention"}, 0);
  CHECK(count_kind(g, OpKind::flash_attention) == 4);
  CHECK(count_kind(g, OpKind::attn_scores) == 0);
  CHECK(count_kind(g, OpKind::attn_softmax) == 0);
  CHECK_FALSE(any_tensor_named_with(g, "attn.scores.out"));
  CHECK_FALSE(any_tensor_named_with(g, "attn.softmax.out"));
  CHECK(g.ops.size() == base.ops.size() - 8);
  // The fused op does the two GEMMs; only the softmax FLOPs disappear.
  const Op* fp = nullptr;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::flash_attention && !fp) fp = &op;
  REQUIRE(fp != nullptr);
  const Op& f = *fp;
  CHECK(f.inputs.size() == 3);
  CHECK(g.tensor(f.inputs[1]).role == TensorRole::kv_cache);
  CHECK(g.tensor(f.outputs[1]).dtype == DType::fp32);
  CHECK(g.tensor(f.outputs[1]).shape == std::vector<int64_t>{2, 4, 1});

  const Graph t = with(tiny_llama(), train_w(), {"bf16", "flash_attention"});
  CHECK(count_kind(t, OpKind::flash_attention_bwd) == 2);
  CHECK(count_kind(t, OpKind::attn_scores_bwd) == 0);
  CHECK(count_kind(t, OpKind::attn_context_bwd) == 0);
  CHECK_FALSE(any_tensor_named_with(t, "softmax"));
  for (const Op& op : t.ops)
    if (op.kind == OpKind::flash_attention_bwd) {
      CHECK(op.inputs.size() == 6);
      CHECK(op.outputs.size() == 3);
      CHECK(t.tensor(op.inputs[5]).count == 2);  // LSE saved for backward, for every layer
    }
}

namespace {

std::vector<StackStep> paged_stack(std::optional<double> block) {
  return {{"bf16", {{"bf16", {}}}}, {"+flash", {{"flash_attention", {}}}}, {"+paged", {{"paged_kv", block}}}};
}

std::string stack_error(const ModelConfig& m, const Workload& w, const std::vector<StackStep>& stack) {
  try {
    (void)build_stack_graph(m, w, stack, stack.size() - 1, BuildOptions{0});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("passes: paged_kv pages the cache and wires the block table into appends and attention") {
  Workload w = decode_w();
  w.prompt = 100, w.new_tokens = 100;  // capacity 200 rows; the step attends 151 (context 150 + 1)
  const auto stack = paged_stack(std::nullopt);
  const Graph flat = build_stack_graph(tiny_llama(), w, stack, 1, BuildOptions{0});
  const Graph g = build_stack_graph(tiny_llama(), w, stack, 2, BuildOptions{0});
  g.check();
  // 16-row pages: ceil(151 / 16) = 10 per sequence, 160 rows instead of 200.
  int tables = 0, table_id = -1;
  for (const Tensor& t : g.tensors)
    if (t.name == "kv_block_table") ++tables, table_id = t.id;
  REQUIRE(tables == 1);
  CHECK(g.tensor(table_id).shape == std::vector<int64_t>{2, 10});
  CHECK(g.tensor(table_id).dtype == DType::int32);
  CHECK(role_bytes(g, TensorRole::kv_cache) == role_bytes(flat, TensorRole::kv_cache) * 160 / 200);
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::kv_cache) CHECK(t.shape == std::vector<int64_t>{20, 16, 2, 16});
  // The appends and the attention become their paged kinds; no contiguous-cache kind is left.
  CHECK(count_kind(g, OpKind::kv_append) == 0);
  CHECK(count_kind(g, OpKind::flash_attention) == 0);
  int appends = 0, attends = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::paged_kv_append && op.kind != OpKind::paged_flash_attention) continue;
    CHECK(op.attrs.kv_block == 16);
    CHECK(op.attrs.kv_capacity == 160);
    CHECK(op.inputs.back() == table_id);
    appends += op.kind == OpKind::paged_kv_append;
    attends += op.kind == OpKind::paged_flash_attention;
  }
  CHECK(appends == 8);  // K and V of 4 layers
  CHECK(attends == 4);
  // A page size from the step: 64-row pages, ceil(151 / 64) = 3 per sequence.
  const Graph g64 = build_stack_graph(tiny_llama(), w, paged_stack(64.0), 2, BuildOptions{0});
  CHECK(role_bytes(g64, TensorRole::kv_cache) == role_bytes(flat, TensorRole::kv_cache) * 192 / 200);
}

TEST_CASE("passes: paged_kv on Llama-3-8B at a 1024 + 256 token decode holds 1168 of 1280 rows") {
  // KV per row = 2 (K, V) · 32 layers · 8 kv heads · 128 · 2 bytes (bf16) = 131,072 bytes.
  // Contiguous: 1280 rows = 160 MiB. Paged at context 1152 (+1): ceil(1153 / 16) = 73 pages
  // = 1168 rows = 146 MiB.
  Workload w;
  w.phase = Phase::decode;
  w.batch = 1, w.prompt = 1024, w.new_tokens = 256;
  const auto stack = paged_stack(std::nullopt);
  const Graph flat = build_stack_graph(llama3_8b(), w, stack, 1, BuildOptions{1});
  const Graph g = build_stack_graph(llama3_8b(), w, stack, 2, BuildOptions{1});
  CHECK(role_bytes(flat, TensorRole::kv_cache) == approx(1280.0 * 131072));
  CHECK(role_bytes(g, TensorRole::kv_cache) == approx(1168.0 * 131072));
  CHECK(role_bytes(flat, TensorRole::kv_cache) == approx(formulas::kv_cache_bytes(llama3_8b(), 1, 1280, DType::bf16)));
}

TEST_CASE("passes: fp8_kv stores the KV cache in one byte per element, contiguous or paged") {
  // Llama-3-8B at a 1024 + 256 token decode: per row 2 · 32 layers · 8 kv heads · 128 = 65,536
  // elements; fp8 holds them in 65,536 bytes, half of bf16's 131,072.
  Workload w;
  w.phase = Phase::decode;
  w.batch = 1, w.prompt = 1024, w.new_tokens = 256;
  auto stack = paged_stack(std::nullopt);  // bf16, flash_attention, paged_kv
  stack.insert(stack.begin() + 2, StackStep{"+fp8_kv", {{"fp8_kv", {}}}});
  const Graph flat = build_stack_graph(llama3_8b(), w, stack, 2, BuildOptions{1});
  const Graph paged = build_stack_graph(llama3_8b(), w, stack, 3, BuildOptions{1});
  CHECK(role_bytes(flat, TensorRole::kv_cache) == approx(1280.0 * 65536));
  CHECK(role_bytes(paged, TensorRole::kv_cache) == approx(1168.0 * 65536));
  CHECK(role_bytes(flat, TensorRole::kv_cache) == approx(formulas::kv_cache_bytes(llama3_8b(), 1, 1280, DType::fp8)));
  for (const Graph* g : {&flat, &paged})
    for (const Op& op : g->ops) {
      bool touches = false;
      for (int id : op.inputs) touches = touches || g->tensor(id).role == TensorRole::kv_cache;
      if (!touches) continue;
      // The cache is fp8; the kernels still compute in the step's precision.
      CHECK(op.dtype == DType::bf16);
      CHECK(op.attrs.kv_scale == 1.0);
    }
}

TEST_CASE("passes: fp8_kv explains what it needs") {
  const std::vector<StackStep> no_flash = {{"bf16", {{"bf16", {}}}}, {"+fp8_kv", {{"fp8_kv", {}}}}};
  CHECK(stack_error(tiny_llama(), decode_w(), no_flash).find("needs 'flash_attention' earlier in the stack") !=
        std::string::npos);
  const std::vector<StackStep> flash = {{"bf16", {{"bf16", {}}}},
                                        {"+flash", {{"flash_attention", {}}}},
                                        {"+fp8_kv", {{"fp8_kv", {}}}}};
  CHECK(stack_error(tiny_llama(), train_w(), flash).find("this step has none") != std::string::npos);
  Workload w = decode_w();
  w.kv_cache = false;
  CHECK(stack_error(tiny_llama(), w, flash).find("this step has none") != std::string::npos);
}

TEST_CASE("passes: paged_kv explains what it needs") {
  Workload w = decode_w();
  // Materialized attention reads the cache as contiguous rows.
  const std::vector<StackStep> no_flash = {{"bf16", {{"bf16", {}}}}, {"+paged", {{"paged_kv", {}}}}};
  CHECK(stack_error(tiny_llama(), w, no_flash).find("needs 'flash_attention' earlier in the stack") !=
        std::string::npos);
  // Twice in a cumulative stack.
  auto twice = paged_stack(std::nullopt);
  twice.push_back({"+paged 32", {{"paged_kv", 32.0}}});
  CHECK(stack_error(tiny_llama(), w, twice).find("already applied") != std::string::npos);
  // No cache to page: training, and decode recomputing the context.
  CHECK(stack_error(tiny_llama(), train_w(), paged_stack(std::nullopt)).find("has none") != std::string::npos);
  w.kv_cache = false;
  CHECK(stack_error(tiny_llama(), w, paged_stack(std::nullopt)).find("has none") != std::string::npos);
}

TEST_CASE("passes: fusion merges residual adds into the following norm") {
  const ModelConfig m = tiny_llama();
  const Graph base = with(m, decode_w(), {"fp32"}, 0);
  const Graph g = with(m, decode_w(), {"fusion"}, 0);
  // 2 adds per layer, each read first by a norm (the last by the final norm): 8 merged.
  CHECK(count_kind(g, OpKind::add_rmsnorm) == 8);
  CHECK(count_kind(g, OpKind::residual_add) == 0);
  CHECK(g.ops.size() == base.ops.size() - 8);
  for (const Op& op : g.ops)
    if (op.kind == OpKind::add_rmsnorm) {
      CHECK(op.attrs.fused.size() == 2);
      CHECK(op.inputs.size() == 3);
      CHECK(op.outputs.size() == 2);
    }
  // GPT style, training: forward adds fuse into layernorms, gradient sums stay.
  const Graph t = with(tiny_gpt(), train_w(), {"fusion"}, 0);
  CHECK(count_kind(t, OpKind::add_layernorm) == 8);
  CHECK(count_kind(t, OpKind::residual_add) > 0);
}

TEST_CASE("passes: fused_optimizer leaves one single-pass AdamW") {
  const ModelConfig m = tiny_llama();
  const Graph base = with(m, train_w(), {"bf16"});
  const Graph g = with(m, train_w(), {"bf16", "fused_optimizer"});
  REQUIRE(count_kind(g, OpKind::adamw) == 1);
  double before = 0, flops_before = 0;
  for (const Op& op : base.ops)
    if (op.kind == OpKind::adamw) {
      before += op_bytes(op, base) * op.count;
      flops_before += op_flops(op, base) * op.count;
    }
  for (const Op& op : g.ops)
    if (op.kind == OpKind::adamw) {
      CHECK(op.attrs.passes == 1);
      // Same parameters updated, one sweep instead of four.
      CHECK(op_bytes(op, g) * op.count == approx(before / 4));
      CHECK(op_flops(op, g) * op.count == approx(flops_before));
    }
}

TEST_CASE("passes: cuda_graphs marks the graph as replayed") {
  CHECK_FALSE(with(tiny_llama(), decode_w(), {"fp32"}).graphed);
  CHECK(with(tiny_llama(), decode_w(), {"cuda_graphs"}).graphed);
}

TEST_CASE("passes: recompute reruns each layer's forward before its backward") {
  const ModelConfig m = tiny_llama();
  const Graph base = with(m, train_w(), {"fp32"});
  const Graph g = with(m, train_w(), {"recompute"});
  int first_bwd[2] = {-1, -1}, last_recomputed[2] = {-1, -1};
  for (const Op& op : g.ops) {
    if (op.layer < 0) continue;
    const auto l = static_cast<std::size_t>(op.layer);
    if (op.recomputed) {
      CHECK(op.stage == Stage::backward);
      last_recomputed[l] = op.id;
      for (int id : op.outputs) CHECK(g.tensor(id).count == 1);
    } else if (op.stage == Stage::backward && first_bwd[l] < 0) {
      first_bwd[l] = op.id;
    }
  }
  for (int l = 0; l < 2; ++l) {
    CHECK(last_recomputed[l] >= 0);
    CHECK(last_recomputed[l] < first_bwd[l]);
  }
  // Saved across layers: only each layer's input (the output of the previous layer).
  int saved = 0;
  for (const Tensor& t : g.tensors) saved += t.role == TensorRole::activation && t.count > 1;
  // Layer outputs x1 (layer1's input) and x2 (read by the final norm's backward); layer0's
  // input is the embedding output, one tensor.
  CHECK(saved == 2);
  // Layer 1's backward reads nothing its original forward wrote: only recomputed tensors,
  // gradients and the layer input (written by layer 0).
  std::vector<const Op*> writer(g.tensors.size(), nullptr);
  for (const Op& op : g.ops)
    for (int id : op.outputs) writer[static_cast<std::size_t>(id)] = &op;
  int reads_of_recomputed = 0;
  for (const Op& op : g.ops)
    if (op.stage == Stage::backward && !op.recomputed && op.layer == 1)
      for (int id : op.inputs) {
        const Op* w = writer[static_cast<std::size_t>(id)];
        if (!w || g.tensor(id).role != TensorRole::activation) continue;
        CHECK_FALSE((w->stage == Stage::forward && w->layer == 1));
        reads_of_recomputed += w->recomputed;
      }
  CHECK(reads_of_recomputed > 10);
  CHECK(predict_memory(g).peak < predict_memory(base).peak);
}

TEST_CASE("passes: recompute FLOPs agree with Megatron's full-recompute formula") {
  const ModelConfig m = gpt2_medium();
  const Graph g = with(m, train_w(4, 1024), {"recompute"});
  CHECK(graph_flops(g) ==
        approx(formulas::megatron_train_flops(m, 4, 1024, true)).epsilon(0.02));
}

TEST_CASE("passes: GPT-3 175B with full recompute: GEMM and attention FLOPs against Megatron's eq. 3") {
  // Narayanan et al. 2021, §5.1, eq. 3 counts the GEMMs and the attention matmuls of GPT layers
  // (ffn = 4h, no GQA) and the head: forward once, recomputed once, backward twice. The graph is
  // built with one layer, the others scaled by count; only those two op classes are summed.
  const ModelConfig m = gpt("gpt-3-175b", 96, 12288, 96, 51200, 2048);
  const Graph g = with(m, train_w(2, 2048), {"bf16", "recompute"}, 1);
  double matmuls = 0;
  for (const Op& op : g.ops) {
    const OpClass c = class_of(op.kind);
    if (c == OpClass::gemm || c == OpClass::attention) matmuls += op_flops(op, g) * op.count;
  }
  const double formula = formulas::megatron_train_flops(m, 2, 2048, true);
  CHECK(matmuls == approx(formula).epsilon(0.005));
}

TEST_CASE("passes: structural passes compose in either order") {
  const ModelConfig m = tiny_llama();
  for (const auto& order : std::vector<std::vector<std::string>>{
           {"bf16", "flash_attention", "fusion", "fused_optimizer", "recompute"},
           {"recompute", "fusion", "flash_attention", "fused_optimizer", "bf16"}}) {
    const Graph g = with(m, train_w(), order);  // build_stack_graph runs Graph::check()
    CHECK(count_kind(g, OpKind::flash_attention) == 4);  // 2 layers, forward + recomputed
    CHECK(count_kind(g, OpKind::flash_attention_bwd) == 2);
    CHECK(count_kind(g, OpKind::attn_softmax) == 0);
    CHECK(count_kind(g, OpKind::adamw) == 1);
    // Flash backward reads Q, K, V, O and LSE from the recomputed forward (dO is a gradient).
    std::vector<int> writer(g.tensors.size(), -1);
    for (const Op& op : g.ops)
      for (int id : op.outputs) writer[static_cast<std::size_t>(id)] = op.id;
    for (const Op& op : g.ops)
      if (op.kind == OpKind::flash_attention_bwd)
        for (int i : {0, 1, 2, 3, 5}) {
          const int w = writer[static_cast<std::size_t>(op.inputs[static_cast<std::size_t>(i)])];
          REQUIRE(w >= 0);
          CHECK(g.ops[static_cast<std::size_t>(w)].recomputed);
        }
  }
}

TEST_CASE("passes: recompute after fusion saves only the layer inputs") {
  const ModelConfig m = tiny_llama();  // 4 layers, h 64; train_w: 2 × 32 = 64 tokens
  const Graph fr = with(m, train_w(), {"fusion", "recompute"});
  const Graph rf = with(m, train_w(), {"recompute", "fusion"});
  // As without fusion: layer0's output (layer1's input) and layer1's output (read by the final
  // norm's backward) stand for 2 layers each. The norm output the fused add at the layer
  // boundary writes is recomputed from the saved input, not saved.
  int saved = 0;
  for (const Tensor& t : fr.tensors) saved += t.role == TensorRole::activation && t.count > 1;
  CHECK(saved == 2);
  // Layer 1 recomputes its attn_norm (rmsnorm, 5 FLOPs × 64·64) from the saved layer input,
  // and layer 0 reruns just the add of its fused add+norm at the boundary (64·64 FLOPs).
  int split_norms = 0, split_adds = 0;
  for (const Op& op : fr.ops) {
    if (!op.recomputed) continue;
    if (op.name == "layer1.attn_norm.recompute") {
      ++split_norms;
      CHECK(op.kind == OpKind::rmsnorm);
      CHECK(op.layer == 1);
      CHECK(op_flops(op, fr) == 5 * 64 * 64);
    }
    if (op.name == "layer0.mlp.residual.recompute") {
      ++split_adds;
      CHECK(op.kind == OpKind::residual_add);
      CHECK(op_flops(op, fr) == 64 * 64);
    }
  }
  CHECK(split_norms == 1);
  CHECK(split_adds == 1);
  // Either order: the same work and the same memory.
  CHECK(graph_flops(fr) == approx(graph_flops(rf)));
  CHECK(predict_memory(fr).peak == approx(predict_memory(rf).peak));
}

TEST_CASE("passes: a layer-sampled training graph predicts the full model's peak memory") {
  const ModelConfig m = tiny_llama();  // 4 layers
  for (const auto& stack : std::vector<std::vector<std::string>>{
           {"fp32"}, {"recompute"}, {"bf16", "flash_attention", "recompute"}}) {
    CAPTURE(stack.back());
    const double full = predict_memory(with(m, train_w(2, 64), stack, 0)).peak;
    for (int64_t built : {1, 2})
      CHECK(predict_memory(with(m, train_w(2, 64), stack, built)).peak == approx(full));
  }
}
