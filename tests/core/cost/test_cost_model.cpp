// Cost model: roofline arithmetic on hand-checkable gemms, precision fallback, launch costs,
// collectives, the stream timeline, and predict() over a small hand-built graph.
#include <doctest/doctest.h>

#include <cmath>

#include "approx.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/roofline.hpp"
#include "core/errors.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

// H100-SXM-like datasheet figures with every efficiency 1.0, so times are pure roofline.
Hardware h100_like(bool with_fp8 = true) {
  Hardware hw;
  hw.name = "H100-like";
  hw.peak_flops[static_cast<int>(DType::fp32)] = 67e12;
  hw.peak_flops[static_cast<int>(DType::tf32)] = 494e12;
  hw.peak_flops[static_cast<int>(DType::bf16)] = 989e12;
  hw.peak_flops[static_cast<int>(DType::fp16)] = 989e12;
  if (with_fp8) hw.peak_flops[static_cast<int>(DType::fp8)] = 1979e12;
  hw.memory_bytes = 80e9;
  hw.memory_bandwidth = 3.35e12;
  hw.launch_eager = 4e-6;
  hw.launch_graph = 1e-6;
  for (OpClass c : all_op_classes) {
    hw.compute_efficiency[c] = 1.0;
    hw.memory_efficiency[c] = 1.0;
  }
  return hw;
}

Op op_of(OpKind kind, DType dtype, std::string name = "op") {
  Op op;
  op.id = 0;
  op.name = std::move(name);
  op.kind = kind;
  op.dtype = dtype;
  return op;
}

// C[m,n] = A[m,k]·B[k,n] with A an activation, B a weight, appended to g.
int add_gemm(Graph& g, const std::string& name, int64_t m, int64_t n, int64_t k, DType t,
             int a_id = -1, double count = 1) {
  if (a_id < 0) a_id = g.add_tensor({-1, name + ".x", {m, k}, t, TensorRole::input, 1});
  const int b = g.add_tensor({-1, name + ".w", {k, n}, t, TensorRole::weight, count});
  const int c = g.add_tensor({-1, name + ".y", {m, n}, t, TensorRole::activation, 1});
  Op op;
  op.name = name;
  op.kind = OpKind::gemm;
  op.dtype = t;
  op.inputs = {a_id, b};
  op.outputs = {c};
  op.attrs.m = m;
  op.attrs.n = n;
  op.attrs.k = k;
  op.count = count;
  g.add_op(op);
  return c;
}

}  // namespace

TEST_CASE("roofline: a 4096^3 fp16 gemm on H100 is compute bound") {
  const Hardware hw = h100_like();
  const double n = 4096;
  const double flops = 2 * n * n * n;  // 1.374e11
  const double bytes = 3 * n * n * 2;  // A, B, C in fp16: 100.7 MB
  const OpCost c = roofline_cost(op_of(OpKind::gemm, DType::fp16), flops, bytes, hw, false);
  CHECK(c.compute_time == approx(139e-6).epsilon(0.001));   // 1.374e11 / 989e12
  CHECK(c.memory_time == approx(30.05e-6).epsilon(0.001));  // 1.007e8 / 3.35e12
  CHECK(c.compute_bound);
  CHECK(c.intensity == approx(4096.0 / 3));
  CHECK(c.launch_time == 4e-6);
  CHECK(c.time == approx(c.compute_time + 4e-6));
  CHECK(c.supported);
  CHECK(c.priced_as == DType::fp16);
}

TEST_CASE("roofline: a 1x4096x4096 decode gemm is memory bound; graphs cut launch cost") {
  const Hardware hw = h100_like();
  const double flops = 2.0 * 4096 * 4096;                    // 3.36e7 -> 33.9 ns
  const double bytes = (4096.0 + 4096.0 * 4096 + 4096) * 2;  // x, W, y: 33.57 MB -> 10.02 us
  const Op op = op_of(OpKind::gemm, DType::fp16);
  const OpCost eager = roofline_cost(op, flops, bytes, hw, false);
  CHECK_FALSE(eager.compute_bound);
  CHECK(eager.compute_time == approx(33.92e-9).epsilon(0.001));
  CHECK(eager.memory_time == approx(10.021e-6).epsilon(0.001));
  CHECK(eager.time == approx(10.021e-6 + 4e-6).epsilon(0.001));
  const OpCost graphed = roofline_cost(op, flops, bytes, hw, true);
  CHECK(graphed.launch_time == 1e-6);
  CHECK(eager.time - graphed.time == approx(3e-6));
}

TEST_CASE("roofline: each kernel an op launches pays the launch cost") {
  const Hardware hw = h100_like();  // launch 4 us eager, 1 us in a graph
  Op adamw = op_of(OpKind::adamw, DType::fp32);
  adamw.attrs.passes = 4;  // an unfused AdamW: four sweeps, four kernels
  const double bytes = 4096.0 * 112;  // tiny: the launches dominate
  const OpCost eager = roofline_cost(adamw, 0, bytes, hw, false);
  CHECK(eager.launch_time == approx(16e-6));
  CHECK(eager.time == approx(eager.memory_time + 16e-6));
  CHECK(roofline_cost(adamw, 0, bytes, hw, true).launch_time == approx(4e-6));
  adamw.attrs.passes = 1;  // fused: one kernel
  CHECK(roofline_cost(adamw, 0, bytes, hw, false).launch_time == approx(4e-6));
}

TEST_CASE("roofline: class efficiencies scale the two roofs") {
  Hardware hw = h100_like();
  hw.compute_efficiency[OpClass::gemm] = 0.5;
  hw.memory_efficiency[OpClass::gemm] = 0.8;
  const OpCost c = roofline_cost(op_of(OpKind::gemm, DType::bf16), 989e9, 3.35e9, hw, false);
  CHECK(c.compute_time == approx(2e-3));    // 989e9 / (989e12 · 0.5)
  CHECK(c.memory_time == approx(1.25e-3));  // 3.35e9 / (3.35e12 · 0.8)
  // Other classes keep their own entries.
  const OpCost n = roofline_cost(op_of(OpKind::rmsnorm, DType::bf16), 0, 3.35e9, hw, false);
  CHECK(n.memory_time == approx(1e-3));
}

TEST_CASE("roofline: dtypes the hardware lacks are priced at a wider precision") {
  const double flops = 989e9;
  SUBCASE("fp8 without fp8 peak -> bf16, flagged unsupported") {
    const OpCost c =
        roofline_cost(op_of(OpKind::gemm, DType::fp8), flops, 0, h100_like(false), false);
    CHECK_FALSE(c.supported);
    CHECK(c.priced_as == DType::bf16);
    CHECK(c.compute_time == approx(1e-3));
  }
  SUBCASE("fp8 with fp8 peak runs at twice the bf16 rate") {
    const OpCost c =
        roofline_cost(op_of(OpKind::gemm, DType::fp8), flops, 0, h100_like(true), false);
    CHECK(c.supported);
    CHECK(c.compute_time == approx(0.5e-3).epsilon(0.001));
  }
  SUBCASE("fp16 on fp32-only hardware -> fp32") {
    Hardware cpu = h100_like(false);
    cpu.peak_flops = {};
    cpu.peak_flops[static_cast<int>(DType::fp32)] = 1e12;
    const OpCost c = roofline_cost(op_of(OpKind::gemm, DType::fp16), flops, 0, cpu, false);
    CHECK_FALSE(c.supported);
    CHECK(c.priced_as == DType::fp32);
    CHECK(c.compute_time == approx(0.989));
  }
  SUBCASE("tf32 without a tf32 peak is plain fp32, still supported") {
    Hardware hw = h100_like();
    hw.peak_flops[static_cast<int>(DType::tf32)] = 0;
    const OpCost c = roofline_cost(op_of(OpKind::gemm, DType::tf32), 67e9, 0, hw, false);
    CHECK(c.supported);
    CHECK(c.priced_as == DType::fp32);
    CHECK(c.compute_time == approx(1e-3));
  }
  SUBCASE("int32 ops only move data") {
    const OpCost c =
        roofline_cost(op_of(OpKind::embedding, DType::int32), 1e12, 3.35e6, h100_like(), false);
    CHECK(c.flops == 0);
    CHECK(c.compute_time == 0);
    CHECK(c.memory_time == approx(1e-6));
    CHECK(c.supported);
  }
}

TEST_CASE("roofline: unusable profiles are configuration errors") {
  Hardware none = h100_like();
  none.peak_flops = {};
  CHECK_THROWS_AS((void)roofline_cost(op_of(OpKind::gemm, DType::fp32), 1e9, 1e6, none, false),
                  ConfigError);
  Hardware no_bw = h100_like();
  no_bw.memory_bandwidth = 0;
  CHECK_THROWS_AS((void)roofline_cost(op_of(OpKind::gemm, DType::fp32), 1e9, 1e6, no_bw, false),
                  ConfigError);
}

TEST_CASE("collectives: ring alpha-beta times") {
  Hardware hw = h100_like();
  hw.nvlink = {450e9, 5e-6};
  // all-reduce over 8 ranks of 1 GB: 14 steps of 5 us + 2·7/8 GB at 450 GB/s.
  CHECK(*collective_time(Collective::all_reduce, 8, 1e9, hw) ==
        approx(14 * 5e-6 + 1.75e9 / 450e9));
  CHECK(*collective_time(Collective::all_gather, 4, 1e9, hw) ==
        approx(3 * 5e-6 + 0.75e9 / 450e9));
  CHECK(*collective_time(Collective::send_recv, 2, 1e9, hw) == approx(5e-6 + 1e9 / 450e9));
  CHECK(*collective_time(Collective::all_reduce, 1, 1e9, hw) == 0);
  CHECK_FALSE(collective_time(Collective::all_reduce, 8, 1e9, h100_like()).has_value());
}

TEST_CASE("collectives: a group larger than a node runs over infiniband") {
  Hardware hw = h100_like();
  hw.nvlink = {450e9, 5e-6};
  hw.infiniband = {50e9, 10e-6};
  hw.gpus_per_node = 8;
  // 8 ranks stay on NVLink. 16 cross nodes: 30 messages of 10 us, and 2·15/16 GB a rank at
  // min(450, 8 NICs x 50) = 400 GB/s (one ring per NIC).
  CHECK(*collective_time(Collective::all_reduce, 8, 1e9, hw) == approx(14 * 5e-6 + 1.75e9 / 450e9));
  CHECK(*collective_time(Collective::all_reduce, 16, 1e9, hw) == approx(30 * 10e-6 + 1.875e9 / 400e9));
  // All-to-all over 16: 15/16 GB a rank, 8/16 GB of it through its own NIC: 15 x 10 us + 0.5 GB / 50 GB/s.
  CHECK(*collective_time(Collective::all_to_all, 16, 1e9, hw) == approx(15 * 10e-6 + 0.5e9 / 50e9));
  // Send/recv between ring neighbours: a node's edge rank sends the whole 1 GB over one NIC.
  CHECK(*collective_time(Collective::send_recv, 16, 1e9, hw) == approx(10e-6 + 1e9 / 50e9));
  // Unknown node size (0): every group stays on the fastest link.
  hw.gpus_per_node = 0;
  CHECK(*collective_time(Collective::all_reduce, 16, 1e9, hw) == approx(30 * 5e-6 + 1.875e9 / 450e9));
  // Across nodes without an inter-node link: no price.
  hw.gpus_per_node = 8;
  hw.infiniband = {};
  CHECK_FALSE(collective_time(Collective::all_reduce, 16, 1e9, hw).has_value());
}

TEST_CASE("collectives: a strided group crosses nodes over the NICs of its own ranks") {
  Hardware hw = h100_like();
  hw.nvlink = {450e9, 5e-6};
  hw.infiniband = {50e9, 10e-6};
  hw.gpus_per_node = 8;
  // Data-parallel ranks of a tp=8 layout: one per node. Two of them cross the network over one
  // NIC each: 2 messages of 10 us and 1 GB a rank at 50 GB/s.
  CHECK(group_ranks_per_node(2, 8, hw) == 1);
  CHECK(*collective_time(Collective::all_reduce, 2, 1e9, hw, 8) == approx(2 * 10e-6 + 1e9 / 50e9));
  // tp=4: two ranks of a group of 16 share each node, so two NICs carry the node's rings.
  CHECK(group_ranks_per_node(16, 4, hw) == 2);
  CHECK(*collective_time(Collective::all_reduce, 16, 1e9, hw, 4) == approx(30 * 10e-6 + 1.875e9 / 100e9));
  // tp=2: a group of 4 still fits in a node (ranks 0, 2, 4, 6) and stays on NVLink.
  CHECK(group_ranks_per_node(4, 2, hw) == 4);
  CHECK(*collective_time(Collective::all_reduce, 4, 1e9, hw, 2) == approx(6 * 5e-6 + 1.5e9 / 450e9));
  // A fit measured inside one node does not price a group spread over nodes.
  hw.calibration.collectives[{Collective::all_reduce, 2}] = CollectiveFit{};
  CHECK(*collective_time(Collective::all_reduce, 2, 1e9, hw, 8) == approx(2 * 10e-6 + 1e9 / 50e9));
}

TEST_CASE("collectives: across many nodes a small all-reduce takes the tree") {
  Hardware hw = h100_like();
  hw.nvlink = {450e9, 5e-6};
  hw.infiniband = {50e9, 10e-6};
  hw.gpus_per_node = 8;
  // 1,024 ranks on 128 nodes, 1 MB. The ring pays 2·1023 latencies of 10 us; the tree
  // 2·(log2 128 = 7 IB hops + 7 NVLink hops of 5 us) and 2 MB over a node's 8 NICs.
  const double ring = 2046 * 10e-6 + 2.0 * 1023 / 1024 * 1e6 / 400e9;
  const double tree = 2 * (7 * 10e-6 + 7 * 5e-6) + 2e6 / 400e9;
  CHECK(tree < ring);
  CHECK(*collective_time(Collective::all_reduce, 1024, 1e6, hw) == approx(tree));
  // A large buffer over two nodes stays on the ring (its bytes cost the same; fewer hops).
  CHECK(*collective_time(Collective::all_reduce, 16, 1e9, hw) == approx(30 * 10e-6 + 1.875e9 / 400e9));
  // All-gather has no tree: its ring pays every hop.
  CHECK(*collective_time(Collective::all_gather, 1024, 1e6, hw) ==
        approx(1023 * 10e-6 + 1023.0 / 1024 * 1e6 / 400e9));
}

TEST_CASE("timeline: dependencies and counts serialize; kernels on two streams share the SMs") {
  Graph g;
  const int w = g.add_tensor({-1, "w", {4}, DType::fp32, TensorRole::weight, 1});
  const int t1 = g.add_tensor({-1, "t1", {4}, DType::fp32, TensorRole::activation, 1});
  const int t2 = g.add_tensor({-1, "t2", {4}, DType::fp32, TensorRole::activation, 1});
  const int t3 = g.add_tensor({-1, "t3", {4}, DType::fp32, TensorRole::activation, 1});
  auto add = [&](std::string name, std::vector<int> in, int out, int stream) {
    Op op;
    op.name = std::move(name);
    op.kind = OpKind::residual_add;
    op.inputs = std::move(in);
    op.outputs = {out};
    op.stream = stream;
    g.add_op(op);
  };
  add("a", {w}, t1, 0);       // 10 us on stream 0
  add("b", {w}, t2, 1);       //  6 us on stream 1, independent of a
  add("c", {t1, t2}, t3, 0);  //  2 us, waits for a and b
  std::vector<OpCost> costs(3);
  costs[0].time = 10e-6;
  costs[1].time = 6e-6;
  costs[2].time = 2e-6;
  // b forks from the program after a and needs the SMs a holds: 10 + 6 + 2.
  CHECK(timeline_makespan(g, costs) == approx(18e-6));

  SUBCASE("one stream runs everything back to back") {
    g.ops[1].stream = 0;
    CHECK(timeline_makespan(g, costs) == approx(18e-6));
  }
  SUBCASE("a sampled op stands for count ops") {
    g.ops[0].count = 3;  // a: 0-30, b: 30-36, c: 36-38
    CHECK(timeline_makespan(g, costs) == approx(38e-6));
  }
  SUBCASE("c waits for the slower producer") {
    costs[1].time = 50e-6;
    CHECK(timeline_makespan(g, costs) == approx(62e-6));
  }
  CHECK_THROWS_AS((void)timeline_makespan(g, std::vector<OpCost>(2)), std::logic_error);
}

TEST_CASE("predict: ring attention's merge is a memory-bound element-wise op") {
  // attn_merge of two bf16 blocks O [b 1, q 4096, h 32, d 128] with fp32 LSEs [1, 32, 4096]:
  // three O of 32 MiB and three LSE of 512 KiB move 102.2 MB, 3.06e-5 s at 3.35 TB/s; its
  // 1.62e9 FLOPs take 1.6 µs at the bf16 peak.
  Graph g;
  std::vector<int> ids;
  for (int i = 0; i < 6; ++i) {
    const bool lse = i % 2 == 1;
    ids.push_back(g.add_tensor({-1, "t" + std::to_string(i), lse ? std::vector<int64_t>{1, 32, 4096}
                                                                   : std::vector<int64_t>{4096, 4096},
                                lse ? DType::fp32 : DType::bf16, TensorRole::activation, 1}));
  }
  Op op = op_of(OpKind::attn_merge, DType::bf16, "merge");
  op.inputs = {ids[0], ids[1], ids[2], ids[3]};
  op.outputs = {ids[4], ids[5]};
  op.attrs.batch = 1, op.attrs.seq_q = 4096, op.attrs.heads = 32, op.attrs.head_dim = 128;
  g.add_op(op);
  const OpCost c = predict_op(g.ops[0], g, h100_like());
  const double bytes = 3 * 4096.0 * 4096 * 2 + 3 * 32.0 * 4096 * 4;  // 102,236,160
  CHECK(c.flops == 4096.0 * 32 * (3 * 128 + 10));                   // 1.6148e9
  CHECK(c.bytes == bytes);
  CHECK_FALSE(c.compute_bound);
  CHECK(c.memory_time == approx(bytes / 3.35e12));  // 30.5 µs
  CHECK(c.time == approx(bytes / 3.35e12 + 4e-6));
}

TEST_CASE("predict: a two-gemm decode graph, hand-checked") {
  // x[1,4096] -> gemm1 (W 4096x4096, 4 layers sampled as count 4) -> gemm2 (W 4096x8192).
  Graph g;
  g.workload.phase = Phase::decode;
  g.workload.batch = 1;
  const int y = add_gemm(g, "up", 1, 4096, 4096, DType::fp16, -1, 4);
  add_gemm(g, "down", 1, 8192, 4096, DType::fp16, y, 1);
  Hardware hw = h100_like();
  hw.host_overhead = 20e-6;

  const Prediction p = predict(g, hw);
  REQUIRE(p.ops.size() == 2);
  const double f1 = 2.0 * 4096 * 4096, f2 = 2.0 * 4096 * 8192;
  const double b1 = (4096.0 + 4096.0 * 4096 + 4096) * 2, b2 = (4096.0 + 4096.0 * 8192 + 8192) * 2;
  CHECK(p.ops[0].flops == f1);
  CHECK(p.ops[0].bytes == b1);
  CHECK(p.ops[1].bytes == b2);
  const double t1 = b1 / 3.35e12 + 4e-6, t2 = b2 / 3.35e12 + 4e-6;  // both memory bound
  CHECK(p.ops[0].time == approx(t1));
  CHECK(p.time_by_class.at(OpClass::gemm) == approx(4 * t1 + t2));
  CHECK(p.time_by_class.size() == 1);
  CHECK(p.host_time == 20e-6);
  CHECK(p.step_time == approx(4 * t1 + t2 + 20e-6));
  CHECK(p.flops == approx(4 * f1 + f2));
  CHECK(p.mfu == approx((4 * f1 + f2) / (p.step_time * 989e12)));
  CHECK(p.tokens_per_second(g) == approx(1 / p.step_time));
  CHECK(p.unsupported.empty());
  // Weights scaled by count: 4 · 32 MiB + 64 MiB, plus the 8 KiB input.
  CHECK(p.memory.by_role.at(TensorRole::weight) == 4 * 4096.0 * 4096 * 2 + 4096.0 * 8192 * 2);
  CHECK(p.memory_executed.by_role.at(TensorRole::weight) == 4096.0 * 4096 * 2 + 4096.0 * 8192 * 2);
  CHECK(p.fits);
  CHECK(p.hardware == "H100-like");

  SUBCASE("missing fp8 is listed once and priced at bf16") {
    for (auto& op : g.ops) op.dtype = DType::fp8;
    const Prediction q = predict(g, h100_like(false));
    CHECK(q.unsupported == std::vector<std::string>{"fp8"});
    CHECK_FALSE(q.ops[0].supported);
    CHECK(q.ops[1].priced_as == DType::bf16);
  }
  SUBCASE("recomputed FLOPs count in the step but not in MFU") {
    g.ops[1].recomputed = true;
    const Prediction q = predict(g, hw);
    CHECK(q.flops == approx(4 * f1 + f2));
    CHECK(q.mfu == approx(4 * f1 / (q.step_time * 989e12)));
  }
  SUBCASE("a device too small does not fit") {
    hw.memory_bytes = 100e6;  // the scaled weights need 201 MB
    CHECK_FALSE(predict(g, hw).fits);
  }
}
