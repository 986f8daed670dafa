// Host data: upload pricing over the host link (pinned and pageable), the stream timeline
// (overlap, fork, join, shared resources), last_use and the memory model with host tensors,
// the builders' uploads, the pinned_memory and prefetch passes, the CPU backend on host-data
// graphs, measured step time as a timeline, and the scenario field.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "approx.hpp"
#include "backends/cpu/cpu_backend.hpp"
#include "backends/common/measurement.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/memory_model.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/passes/passes.hpp"
#include "graph_test_models.hpp"
#include "test_dsl_support.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

int tensor(Graph& g, const char* name, std::vector<int64_t> shape, TensorRole role,
           Residence where = Residence::device, DType dtype = DType::fp32) {
  Tensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.role = role;
  t.residence = where;
  return g.add_tensor(std::move(t));
}

int op(Graph& g, const char* name, OpKind kind, std::vector<int> in, std::vector<int> out,
       int stream = 0) {
  Op o;
  o.name = name;
  o.kind = kind;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  o.stream = stream;
  return g.add_op(o);
}

const Op* find_op(const Graph& g, const std::string& name) {
  for (const Op& o : g.ops)
    if (o.name == name) return &o;
  return nullptr;
}

const Tensor* find_tensor(const Graph& g, const std::string& name) {
  for (const Tensor& t : g.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

int index_of(const Graph& g, const std::string& name) {
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].name == name) return static_cast<int>(i);
  return -1;
}

ModelConfig small_llama() {
  ModelConfig m = test_models::tiny_llama();
  m.layers = 2, m.hidden = 32, m.ffn_hidden = 64, m.vocab = 50, m.max_seq = 64;
  return m;
}

Workload train(int64_t grad_accum = 1, bool host_data = true) {
  Workload w;
  w.phase = Phase::train;
  w.batch = 2, w.seq = 8, w.grad_accum = grad_accum;
  w.host_data = host_data;
  return w;
}

Graph stacked(const ModelConfig& m, const Workload& w, std::vector<std::string> passes) {
  std::vector<StackStep> stack{{"step", {}}};
  for (auto& p : passes) stack[0].passes.push_back(PassSpec{std::move(p), std::nullopt});
  return build_stack_graph(m, w, stack, 0);
}

std::string config_error(const ModelConfig& m, const Workload& w, std::vector<std::string> passes) {
  try {
    (void)stacked(m, w, std::move(passes));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

RunOptions once() {
  RunOptions o;
  o.warmup = 0;
  o.repeats = 1;
  return o;
}

// A copy of a 64 MiB int32 buffer: 16 Mi values.
Graph one_copy(Residence from, Residence to) {
  Graph g;
  const int64_t n = 16 * 1024 * 1024;
  const int x = tensor(g, "x", {n}, TensorRole::input, from, DType::int32);
  const int y = tensor(g, "y", {n}, TensorRole::input, to, DType::int32);
  op(g, "copy", OpKind::copy, {x}, {y});
  g.ops[0].attrs.elements = n;
  return g;
}

// Timeline graph: a host input h, its device buffer d, a weight w and activations.
struct StreamGraph {
  Graph g;
  int h = -1, d = -1, w = -1, a = -1, b = -1;
};

StreamGraph stream_graph() {
  StreamGraph s;
  s.h = tensor(s.g, "h", {4}, TensorRole::input, Residence::host_pinned);
  s.d = tensor(s.g, "d", {4}, TensorRole::input);
  s.w = tensor(s.g, "w", {4}, TensorRole::weight);
  s.a = tensor(s.g, "a", {4}, TensorRole::activation);
  s.b = tensor(s.g, "b", {4}, TensorRole::activation);
  return s;
}

}  // namespace

TEST_CASE("host data: a 64 MiB upload on H100-SXM, pinned and pageable") {
  const Hardware h100 = find_hardware("H100-SXM");
  REQUIRE(h100.pcie.bandwidth == 64e9);      // PCIe 5.0 x16, per direction
  REQUIRE(h100.pcie.latency == 5e-6);
  REQUIRE(h100.host_copy_bandwidth == 10e9); // one host thread's memcpy
  const double bytes = 64.0 * 1024 * 1024;   // 67,108,864

  // Pinned: 5 µs + 67108864 / 64e9 = 5 µs + 1048.576 µs = 1053.576 µs; + 4 µs launch.
  const Graph pinned = one_copy(Residence::host_pinned, Residence::device);
  const OpCost p = predict_op(pinned.ops[0], pinned, h100);
  CHECK(p.bytes == bytes);
  CHECK(p.memory_time == approx(1053.576e-6));
  CHECK(p.time == approx(1057.576e-6));
  CHECK(transfer_label(pinned.ops[0], pinned) == "upload (pinned)");

  // Pageable adds the staging memcpy: 67108864 / 10e9 = 6710.8864 µs -> 7764.4624 µs + 4 µs.
  const Graph pageable = one_copy(Residence::host_pageable, Residence::device);
  const OpCost q = predict_op(pageable.ops[0], pageable, h100);
  CHECK(q.memory_time == approx(7764.4624e-6));
  CHECK(q.time == approx(7768.4624e-6));
  CHECK(transfer_label(pageable.ops[0], pageable) == "upload (pageable)");

  // A download prices the same way; the label says the direction.
  const Graph down = one_copy(Residence::device, Residence::host_pinned);
  CHECK(predict_op(down.ops[0], down, h100).time == approx(1057.576e-6));
  CHECK(transfer_label(down.ops[0], down) == "download (pinned)");

  // Device to device stays a memory roofline: read + write 2 × 64 MiB at 3.35 TB/s × 0.9.
  const Graph d2d = one_copy(Residence::device, Residence::device);
  CHECK(predict_op(d2d.ops[0], d2d, h100).memory_time ==
        approx(2 * bytes / (3.35e12 * 0.9)));
  CHECK(transfer_label(d2d.ops[0], d2d).empty());

  // With a captured graph the launch part is the replay cost.
  Graph graphed = pinned;
  graphed.graphed = true;
  CHECK(predict_op(graphed.ops[0], graphed, h100).time == approx(1054.576e-6));
}

TEST_CASE("host data: hardware without the needed link figures says what to set") {
  Hardware hw = find_hardware("H100-SXM");
  const Graph pageable = one_copy(Residence::host_pageable, Residence::device);
  hw.host_copy_bandwidth = 0;
  CHECK_THROWS_WITH_AS((void)predict_op(pageable.ops[0], pageable, hw),
                       doctest::Contains("host_copy_bandwidth"), ConfigError);
  hw.pcie = {};
  CHECK_THROWS_WITH_AS((void)predict_op(pageable.ops[0], pageable, hw),
                       doctest::Contains("set pcie"), ConfigError);
  // A CPU has no link to cross: its copies are memcpys priced by the memory roofline.
  hw.kind = "cpu";
  CHECK(predict_op(pageable.ops[0], pageable, hw).memory_time ==
        approx(2 * 64.0 * 1024 * 1024 / (3.35e12 * 0.9)));
  // The host-cpu profile's single-thread copy rate is its per-core bandwidth estimate.
  CHECK(find_hardware("host-cpu").host_copy_bandwidth == 8e9);
}

TEST_CASE("timeline: a side-stream upload overlaps a kernel (max, not sum)") {
  StreamGraph s = stream_graph();
  op(s.g, "prefetch", OpKind::copy, {s.h}, {s.d}, 1);   // 6 µs on the upload engine
  op(s.g, "kernel", OpKind::residual_add, {s.w}, {s.a});  // 10 µs on the SMs
  CHECK(timeline_makespan(s.g, std::vector<double>{6e-6, 10e-6}) == approx(10e-6));
  // A longer upload sets the makespan: max(15, 10).
  CHECK(timeline_makespan(s.g, std::vector<double>{15e-6, 10e-6}) == approx(15e-6));
  // Issuing the upload costs the host 4 µs of its 6: the main stream waits for that launch,
  // so only the transfer hides: 4 + 10 µs.
  CHECK(timeline_makespan(s.g, std::vector<double>{6e-6, 10e-6}, true,
                          std::vector<double>{4e-6, 4e-6}) == approx(14e-6));
  // Without copy engines (a CPU: its cores copy) the upload and the kernel take turns.
  CHECK(timeline_makespan(s.g, std::vector<double>{6e-6, 10e-6}, false) ==
        approx(16e-6));

  SUBCASE("the join: a reader of the uploaded tensor waits for the copy") {
    op(s.g, "reader", OpKind::residual_add, {s.d}, {s.b});  // 2 µs
    CHECK(timeline_makespan(s.g, std::vector<double>{15e-6, 10e-6, 2e-6}) ==
          approx(17e-6));
  }
  SUBCASE("on one stream the same ops add up") {
    s.g.ops[0].stream = 0;
    CHECK(timeline_makespan(s.g, std::vector<double>{6e-6, 10e-6}) == approx(16e-6));
  }
}

TEST_CASE("timeline: the fork rule, a side op waits for stream-0 ops issued before it") {
  StreamGraph s = stream_graph();
  op(s.g, "kernel", OpKind::residual_add, {s.w}, {s.a});  // 10 µs
  op(s.g, "upload", OpKind::copy, {s.h}, {s.d}, 1);       //  6 µs, independent data
  // Issued after the kernel: starts at 10 µs although its stream and engine are free.
  CHECK(timeline_makespan(s.g, std::vector<double>{10e-6, 6e-6}) == approx(16e-6));
  // Counts: a 3× kernel delays the fork to 30 µs.
  s.g.ops[0].count = 3;
  CHECK(timeline_makespan(s.g, std::vector<double>{10e-6, 6e-6}) == approx(36e-6));
}

TEST_CASE("timeline: ops on one resource serialize across streams") {
  StreamGraph s = stream_graph();
  const int h2 = tensor(s.g, "h2", {4}, TensorRole::input, Residence::host_pinned);
  const int d2 = tensor(s.g, "d2", {4}, TensorRole::input);
  op(s.g, "upload1", OpKind::copy, {s.h}, {s.d}, 1);  // 6 µs
  op(s.g, "upload2", OpKind::copy, {h2}, {d2}, 2);    // 6 µs, other stream, same copy engine
  CHECK(timeline_makespan(s.g, std::vector<double>{6e-6, 6e-6}) == approx(12e-6));

  SUBCASE("a download uses the other engine and overlaps") {
    s.g.ops[1].inputs = {d2};
    s.g.ops[1].outputs = {h2};
    CHECK(timeline_makespan(s.g, std::vector<double>{6e-6, 6e-6}) == approx(6e-6));
  }
  SUBCASE("kernels on two streams share the SMs") {
    Graph& g = s.g;
    g.ops.clear();
    op(g, "side_kernel", OpKind::residual_add, {s.w}, {s.b}, 1);  // issued first: no fork wait
    op(g, "main_kernel", OpKind::residual_add, {s.w}, {s.a}, 0);
    CHECK(timeline_makespan(g, std::vector<double>{6e-6, 10e-6}) == approx(16e-6));
  }
  CHECK_THROWS_AS((void)timeline_makespan(s.g, std::vector<double>{1e-6}), std::logic_error);
}

TEST_CASE("last_use: side-stream readers and host tensors keep their buffers to the end") {
  Graph g;
  const int h = tensor(g, "h", {2, 4}, TensorRole::input, Residence::host_pageable);    // 32 B
  const int p = tensor(g, "p", {4}, TensorRole::input, Residence::host_pinned);         // 16 B
  const int d = tensor(g, "d", {2, 4}, TensorRole::input);                              // 32 B
  const int a = tensor(g, "a", {2, 4}, TensorRole::activation);                         // 32 B
  const int b = tensor(g, "b", {2, 4}, TensorRole::activation);                         // 32 B
  const int c = tensor(g, "c", {4, 4}, TensorRole::activation);                         // 64 B
  op(g, "upload", OpKind::copy, {h}, {d});       // op0
  op(g, "produce", OpKind::residual_add, {d}, {a});  // op1
  op(g, "side", OpKind::residual_add, {a}, {b}, 1);  // op2: a's last use is on stream 1
  op(g, "later", OpKind::residual_add, {d}, {c});    // op3
  (void)p;
  // h, p, d: -1 (host, host, persistent); a: last used on a side stream -> -1; b: written on
  // the side stream -> -1; c: dies after op3.
  CHECK(last_use(g) == std::vector<int>{-1, -1, -1, -1, -1, 3});

  const MemoryBreakdown m = predict_memory(g, false);
  // Device: d (32) + a (32) + b (32) + c (64) = 160 B at op3; host bytes apart.
  CHECK(m.peak == 160);
  CHECK(m.peak_at == "later");
  CHECK(m.by_role.at(TensorRole::input) == 32);
  CHECK(m.by_role.at(TensorRole::activation) == 128);
  CHECK(m.host_bytes == 48);
  CHECK(m.host_pinned_bytes == 16);

  // Everything on stream 0: a dies after op2, b after op2 (nobody reads it): peak d + c = 96
  // at op3, or d + a + b = 96 at op2 (the first to reach it).
  g.ops[2].stream = 0;
  CHECK(last_use(g) == std::vector<int>{-1, -1, -1, 2, 2, 3});
  CHECK(predict_memory(g, false).peak == 96);
}

TEST_CASE("builders: host data uploads inputs before their first reader, per micro-batch") {
  const ModelConfig m = small_llama();
  const Graph g = build_graph(m, train(4));
  const Tensor* tokens_host = find_tensor(g, "tokens.host");
  const Tensor* targets_host = find_tensor(g, "targets.host");
  REQUIRE(tokens_host != nullptr);
  REQUIRE(targets_host != nullptr);
  CHECK(tokens_host->residence == Residence::host_pageable);
  CHECK(tokens_host->role == TensorRole::input);
  CHECK(tokens_host->dtype == DType::int32);
  CHECK(tokens_host->elements() == 16);  // batch 2 × seq 8
  CHECK(find_tensor(g, "tokens")->residence == Residence::device);
  CHECK(find_tensor(g, "tokens")->role == TensorRole::input);

  int copies = 0;
  for (const Op& o : g.ops) copies += o.kind == OpKind::copy;
  CHECK(copies == 2);
  for (const char* name : {"upload.tokens", "upload.targets"}) {
    CAPTURE(name);
    const Op* u = find_op(g, name);
    REQUIRE(u != nullptr);
    CHECK(u->count == 4);  // grad_accum micro-batches
    CHECK(u->stage == Stage::forward);
    CHECK(u->layer == -1);
    CHECK(u->stream == 0);
    CHECK(copy_direction(*u, g) == CopyDirection::upload);
  }
  CHECK(index_of(g, "upload.tokens") == 0);
  CHECK(index_of(g, "upload.tokens") + 1 == index_of(g, "embedding"));
  CHECK(index_of(g, "upload.targets") + 1 == index_of(g, "cross_entropy"));

  // Without host data: no host tensors, no copies.
  const Graph plain = build_graph(m, train(4, false));
  CHECK(plain.ops.size() + 2 == g.ops.size());
  CHECK(std::none_of(plain.tensors.begin(), plain.tensors.end(),
                     [](const Tensor& t) { return t.on_host(); }));

  // Inference: prefill uploads the prompt, decode the step's new token per sequence.
  Workload prefill;
  prefill.phase = Phase::prefill;
  prefill.batch = 3, prefill.prompt = 5, prefill.new_tokens = 4, prefill.host_data = true;
  Workload decode = prefill;
  decode.phase = Phase::decode;
  const Graph pg = build_graph(m, prefill), dg = build_graph(m, decode);
  REQUIRE(find_op(pg, "upload.tokens") != nullptr);
  REQUIRE(find_op(dg, "upload.tokens") != nullptr);
  CHECK(find_op(pg, "upload.tokens")->count == 1);
  CHECK(find_tensor(pg, "tokens.host")->elements() == 15);
  CHECK(find_tensor(dg, "tokens.host")->elements() == 3);
  CHECK(find_op(dg, "upload.targets") == nullptr);
}

TEST_CASE("passes: pinned_memory and prefetch double-buffer each input on a copy stream") {
  const ModelConfig m = small_llama();
  const Graph pinned = stacked(m, train(4), {"bf16", "pinned_memory"});
  for (const Tensor& t : pinned.tensors)
    if (t.on_host()) CHECK(t.residence == Residence::host_pinned);

  const Graph g = stacked(m, train(4), {"bf16", "pinned_memory", "prefetch"});
  CHECK(g.tensors.size() == pinned.tensors.size() + 2);  // exactly one .next per input
  CHECK(g.ops.size() == pinned.ops.size());
  CHECK(find_op(g, "upload.tokens") == nullptr);
  CHECK(find_op(g, "upload.targets") == nullptr);
  const char* inputs[] = {"tokens", "targets"};
  for (int i = 0; i < 2; ++i) {
    const std::string name = inputs[i];
    CAPTURE(name);
    const Op& p = g.ops[static_cast<std::size_t>(i)];  // issued at the very start of the step
    CHECK(p.name == "prefetch." + name);
    CHECK(p.id == i);
    CHECK(p.stream == 1);
    CHECK(p.count == 4);
    CHECK(p.dtype == DType::int32);  // a copy keeps its data's type through bf16
    CHECK(g.tensor(p.inputs.at(0)).name == name + ".host");
    const Tensor& next = g.tensor(p.outputs.at(0));
    CHECK(next.name == name + ".next");
    CHECK(next.role == TensorRole::input);
    CHECK(next.residence == Residence::device);
    // Token ids stay int32 through the precision pass, in every buffer.
    CHECK(next.dtype == DType::int32);
    CHECK(find_tensor(g, name)->dtype == DType::int32);
    CHECK(find_tensor(g, name + ".host")->dtype == DType::int32);
  }
  // The second buffers show in memory: 2 inputs × 16 int32 = 128 more bytes of inputs.
  const MemoryBreakdown before = predict_memory(pinned, false), after = predict_memory(g, false);
  CHECK(after.by_role.at(TensorRole::input) == before.by_role.at(TensorRole::input) + 128);
  CHECK(after.peak == before.peak + 128);
  CHECK(after.host_bytes == 128);
  CHECK(after.host_pinned_bytes == 128);
  CHECK(before.by_role.at(TensorRole::input) == 128);  // host copies not counted

  // On H100-SXM the uploads now overlap compute: the step is never longer.
  const Hardware h100 = find_hardware("H100-SXM");
  CHECK(predict(g, h100).step_time <= predict(pinned, h100).step_time);
}

TEST_CASE("passes: pinned_memory and prefetch errors say what to change") {
  const ModelConfig m = small_llama();
  CHECK(config_error(m, train(1, false), {"prefetch"}) ==
        "prefetch: this step uploads nothing from the host; set host_data = true in the scenario");
  CHECK(config_error(m, train(1), {"prefetch"}) ==
        "prefetch needs pinned_memory earlier in the stack: a copy from pageable memory blocks "
        "the host, so it cannot overlap compute");
  // pinned_memory without host data would change nothing: the stack is likely a mistake.
  CHECK(config_error(m, train(1, false), {"pinned_memory"}) ==
        "pinned_memory: this step holds nothing in host memory; set host_data = true in the "
        "scenario");
  CHECK(config_error(m, train(1), {"pinned_memory", "prefetch"}).empty());
}

TEST_CASE("cpu backend: a host-data train step computes what the device-input step does") {
  const ModelConfig m = small_llama();
  const Graph base = stacked(m, train(1, false), {"fp32"});
  const std::vector<std::vector<std::string>> stacks = {
      {"fp32"}, {"fp32", "pinned_memory"}, {"fp32", "pinned_memory", "prefetch"}};
  cpu::CpuBackend be;
  const int base_loss = find_tensor(base, "cross_entropy.loss")->id;
  const std::vector<float> want = be.evaluate(base, 7, {base_loss}).at(0);
  for (const auto& passes : stacks) {
    CAPTURE(passes.back());
    const Graph g = stacked(m, train(1), passes);
    const std::vector<float> got = be.evaluate(g, 7, {find_tensor(g, "cross_entropy.loss")->id}).at(0);
    CHECK(got == want);  // the same token ids and targets, so the same loss, bit for bit
    // Host buffers stay out of the measured peak, as they stay out of the memory model's.
    const Measurement meas = be.run(g, once());
    const MemoryBreakdown pred = predict_memory(g, false);
    CHECK(meas.peak_bytes == pred.peak);
    for (TensorRole r : all_tensor_roles)
      CHECK(meas.bytes_by_role_at_peak.at(r) == pred.by_role.at(r));
  }
}

TEST_CASE("summarize_runs: the measured step time is the timeline of the medians") {
  StreamGraph s = stream_graph();
  op(s.g, "upload", OpKind::copy, {s.h}, {s.d}, 0);
  op(s.g, "kernel", OpKind::residual_add, {s.w}, {s.a});
  s.g.ops[1].count = 2;
  // Medians: upload 3 µs (of 5, 3, 1), kernel 4 µs (mean of the middle two of 2, 4, 4, 6).
  const std::vector<std::vector<double>> samples = {{5e-6, 3e-6, 1e-6}, {2e-6, 4e-6, 4e-6, 6e-6}};
  // One stream: Σ median × count = 3 + 2 × 4 = 11 µs.
  Measurement one = summarize_runs(s.g, samples, {1e-3}, "test", "dev", 0, 3);
  CHECK(one.step_time == approx(11e-6));
  CHECK(one.ops.at(1).median == approx(4e-6));
  CHECK(one.time_by_class.at(OpClass::memory) == approx(3e-6));
  // The upload on a copy stream overlaps the kernels: max(3, 8) = 8 µs.
  s.g.ops[0].stream = 1;
  Measurement two = summarize_runs(s.g, samples, {1e-3}, "test", "dev", 0, 3);
  CHECK(two.step_time == approx(8e-6));
  // A backend without copy engines (the CPU) ran them in turn: 3 + 8 = 11 µs.
  Measurement cpu = summarize_runs(s.g, samples, {1e-3}, "test", "dev", 0, 3, false);
  CHECK(cpu.step_time == approx(11e-6));
  // Time by class stays Σ median × count: the kernel class still shows its 8 µs.
  CHECK(two.time_by_class.at(OpClass::pointwise) == approx(8e-6));
}

TEST_CASE("dsl: host_data is a scenario field") {
  const std::string file = test::write_script("host_data.lua", R"(
return scenario {
  model = model("tiny-llama"),
  hardware = "H100-SXM",
  workload = train { batch = 1, seq = 16 },
  host_data = true,
  stacks = { step("baseline", "bf16"), step("+pinned_memory", "pinned_memory"),
             step("+prefetch", "prefetch") },
  execute = false,
}
)");
  const ScriptOutcome out = run_script(file);
  REQUIRE(out.scenario.has_value());
  CHECK(out.scenario->workload.host_data);
  CHECK(describe(out.scenario->workload) == "train micro_batch=1 seq=16 grad_accum=1 host_data=true");
  const std::string bad = test::write_script("host_data_bad.lua", R"(
return scenario { model = "tiny-llama", hardware = "H100-SXM", workload = train { seq = 16 },
                  host_data = 1 }
)");
  CHECK(test::script_error(bad).find("host_data") != std::string::npos);
}
