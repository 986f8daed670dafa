// The GEMM shape factor of hardware without a fitted GEMM table (core/cost/gemm_shape.hpp):
// wave quantization over the SMs and the K loop's fixed part, checked by hand.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "core/cost/gemm_shape.hpp"
#include "core/cost/roofline.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;
using perfsim::test::approx;

TEST_CASE("gemm shape: whole waves and a long K lose only the K loop's fixed part") {
  // 4096² output: 32 × 32 = 1,024 tiles of 128², on 128 SMs exactly 8 waves.
  const GemmShapeEfficiency e = gemm_shape_efficiency(4096, 4096, 4096, 1, 128);
  CHECK(e.tiles == 1024);
  CHECK(e.splits == 1);
  CHECK(e.waves == 8);
  CHECK(e.wave == 1.0);
  CHECK(e.k_loop == approx(4096.0 / (4096 + 128)));
}

TEST_CASE("gemm shape: a partial last wave leaves SMs idle") {
  // The same GEMM on an A100's 108 SMs: 1,024 tiles take 10 waves of 108 (the last holds 52),
  // 1,024 / 1,080 of the SMs' time is work (NVIDIA's wave-quantization example shape class).
  const GemmShapeEfficiency e = gemm_shape_efficiency(4096, 4096, 4096, 1, 108);
  CHECK(e.waves == 10);
  CHECK(e.wave == approx(1024.0 / 1080));
  CHECK(e.factor() == approx(1024.0 / 1080 * 4096 / 4224));
}

TEST_CASE("gemm shape: under one wave, K is split to fill the SMs") {
  // 512 × 512 = 16 tiles on 132 SMs: 8 splits of K = 8192 (132 / 16 = 8; 8192 / 256 = 32
  // allows it), 128 units in one wave, each split's loop 1,024 long.
  const GemmShapeEfficiency e = gemm_shape_efficiency(512, 512, 8192, 1, 132);
  CHECK(e.tiles == 16);
  CHECK(e.splits == 8);
  CHECK(e.waves == 1);
  CHECK(e.wave == approx(128.0 / 132));
  CHECK(e.k_loop == approx(1024.0 / (1024 + 128)));
  // A short K is not split below two tiles' depth: K = 256 stays whole.
  CHECK(gemm_shape_efficiency(512, 512, 256, 1, 132).splits == 1);
}

TEST_CASE("gemm shape: batched GEMMs count every batch's tiles; nothing known is 1") {
  CHECK(gemm_shape_efficiency(128, 128, 4096, 132, 132).tiles == 132);
  CHECK(gemm_shape_efficiency(128, 128, 4096, 132, 132).wave == 1.0);
  CHECK(gemm_shape_efficiency(0, 128, 128, 1, 132).factor() == 1.0);
  CHECK(gemm_shape_efficiency(128, 128, 128, 1, 0).factor() == 1.0);
}

TEST_CASE("gemm shape: the roofline divides a datasheet GEMM's compute time by the factor") {
  Hardware hw = test_models::h100_node();
  hw.kind = "gpu";
  Op op;
  op.kind = OpKind::gemm;
  op.dtype = DType::bf16;
  op.attrs.m = op.attrs.n = op.attrs.k = 4096;
  const double flops = 2.0 * 4096 * 4096 * 4096;
  const OpCost c = roofline_cost(op, flops, 3.0 * 4096 * 4096 * 2, hw, false);
  const double plain = flops / (hw.peak(DType::bf16) * hw.compute_eff(OpClass::gemm));
  CHECK(c.compute_time == approx(plain / gemm_shape_efficiency(4096, 4096, 4096, 1, hw.sm_count).factor()));
  // A CPU is not priced in GPU tiles.
  hw.kind = "cpu";
  CHECK(roofline_cost(op, flops, 0, hw, false).compute_time == approx(plain));
}
