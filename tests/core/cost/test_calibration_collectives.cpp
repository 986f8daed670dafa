// Collective pricing from a profile's fits: its own group, another group inside the node at
// equal bytes per rank, the links elsewhere.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "calibration_test_util.hpp"
#include "core/cost/calibration.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/roofline.hpp"

using namespace perfsim;
using perfsim::test::approx;
using perfsim::test::bare_gpu;

TEST_CASE("calibration: a fitted alpha-beta prices its collective, and other groups in the node") {
  Hardware hw = bare_gpu();
  hw.nvlink = {400e9, 2e-6};
  hw.gpus_per_node = 8;
  hw.calibration.collectives[{Collective::all_reduce, 2}] = CollectiveFit{10e-6, 100e9};
  // 2 ranks, 1 GB buffer: ring all-reduce sends 2(n-1)/n = 1 GB per rank: 10 us + 10 ms.
  CHECK(*collective_time(Collective::all_reduce, 2, 1e9, hw) == approx(10e-6 + 1e-2));
  // 4 ranks in the node, no fit of their own: the 2-rank fit at the same 1.5 GB per rank.
  CHECK(*collective_time(Collective::all_reduce, 4, 1e9, hw) == approx(10e-6 + 1.5e9 / 100e9));
  // Another collective has no fit: the link figures, 3 steps x 2 us + 0.75 GB / 400 GB/s.
  CHECK(*collective_time(Collective::all_gather, 4, 1e9, hw) == approx(3 * 2e-6 + 0.75e9 / 400e9));
  // 16 ranks leave the node: the 2-rank fit measured NVLink only, so the links price it.
  hw.infiniband = {50e9, 5e-6};
  CHECK(*collective_time(Collective::all_reduce, 16, 1e9, hw) ==
        approx(30 * 5e-6 + 1.875e9 / 400e9));
  // price_collective says which of these a fit priced.
  CHECK(price_collective(Collective::all_reduce, 2, 1e9, hw)->fitted);
  CHECK(price_collective(Collective::all_reduce, 4, 1e9, hw)->fitted);
  CHECK_FALSE(price_collective(Collective::all_gather, 4, 1e9, hw)->fitted);
  CHECK_FALSE(price_collective(Collective::all_reduce, 16, 1e9, hw)->fitted);
  CHECK(price_collective(Collective::all_reduce, 4, 1e9, hw)->seconds ==
        approx(*collective_time(Collective::all_reduce, 4, 1e9, hw)));
}

TEST_CASE("calibration: a collective op priced from a fit counts as calibrated") {
  Hardware hw = bare_gpu();
  hw.nvlink = {400e9, 2e-6};
  hw.gpus_per_node = 8;
  Graph g;
  const int x = g.add_tensor({-1, "x", {1000, 1000}, DType::bf16, TensorRole::activation, 1});
  const int y = g.add_tensor({-1, "y", {1000, 1000}, DType::bf16, TensorRole::activation, 1});
  Op op;
  op.name = "all_reduce";
  op.kind = OpKind::collective;
  op.dtype = DType::bf16;
  op.inputs = {x};
  op.outputs = {y};
  op.attrs.collective = Collective::all_reduce;
  op.attrs.group = 4;
  g.add_op(op);
  CHECK_FALSE(predict_op(g.ops[0], g, hw).calibrated);
  hw.calibration.collectives[{Collective::all_reduce, 2}] = CollectiveFit{10e-6, 100e9};
  const OpCost c = predict_op(g.ops[0], g, hw);
  CHECK(c.calibrated);
  // 2 MB buffer over 4 ranks: 3 MB per rank at 100 GB/s + 10 us, plus one eager launch.
  CHECK(c.time == approx(10e-6 + 3e6 / 100e9 + hw.launch_eager));
}

TEST_CASE("calibration: another group's measured sizes are read at equal bytes per rank") {
  Hardware hw = bare_gpu();
  hw.nvlink = {400e9, 2e-6};
  hw.gpus_per_node = 8;
  CollectiveFit two;
  two.payload = {1e6, 1e9};
  two.seconds = {1e-5, 1e-2};
  hw.calibration.collectives[{Collective::all_reduce, 2}] = two;
  // 4 ranks, 400 MB: 600 MB per rank, what 2 ranks send for a 600 MB buffer:
  // 10 us + (10 ms - 10 us) x (600 - 1) / (1000 - 1) = 6.0 ms.
  CHECK(*collective_time(Collective::all_reduce, 4, 4e8, hw) == approx(6e-3));
  // Below the smallest measured size: its time, the latency floor.
  CHECK(*collective_time(Collective::all_reduce, 8, 1e3, hw) == approx(1e-5));
  CHECK(fitted_collective(Collective::all_reduce, 8, hw)->group == 2);

  // The nearest fitted group: the largest below, else the smallest above.
  CollectiveFit four = two;
  four.seconds = {2e-5, 2e-2};
  hw.calibration.collectives[{Collective::all_reduce, 4}] = four;
  CHECK(fitted_collective(Collective::all_reduce, 8, hw)->group == 4);
  CHECK(fitted_collective(Collective::all_reduce, 3, hw)->group == 2);
  hw.calibration.collectives.erase({Collective::all_reduce, 2});
  CHECK(fitted_collective(Collective::all_reduce, 2, hw)->group == 4);
  // 2 ranks, 500 MB: 500 MB per rank, what 4 ranks send for a 333.3 MB buffer (x 3/2):
  // 20 us + (20 ms - 20 us) x (333.3 - 1) / (1000 - 1) = 6.667 ms.
  CHECK(*collective_time(Collective::all_reduce, 2, 5e8, hw) == approx(2e-5 + (2e-2 - 2e-5) * (5e8 / 1.5 - 1e6) / (1e9 - 1e6)));
  CHECK_FALSE(fitted_collective(Collective::all_gather, 2, hw).has_value());
  CHECK_FALSE(fitted_collective(Collective::all_reduce, 16, hw).has_value());
}
