// The nccl-tests bus-bandwidth definitions (backends/cuda/bus_bandwidth.hpp, header-only) against
// the cost model's collective formulas: a collective that takes exactly the cost model's
// bandwidth term must report the link bandwidth as its bus bandwidth, for every rank count.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "backends/cuda/bus_bandwidth.hpp"
#include "core/cost/formulas.hpp"
#include "core/cost/hardware.hpp"
#include "core/cost/roofline.hpp"

using namespace perfsim;
using perfsim::test::approx;

TEST_CASE("bus bandwidth: factors by hand") {
  CHECK(cuda::bus_factor(Collective::all_reduce, 2) == 1.0);
  CHECK(cuda::bus_factor(Collective::all_reduce, 8) == 1.75);
  CHECK(cuda::bus_factor(Collective::all_gather, 4) == 0.75);
  CHECK(cuda::bus_factor(Collective::reduce_scatter, 8) == 0.875);
  CHECK(cuda::bus_factor(Collective::all_to_all, 2) == 0.5);
  CHECK(cuda::bus_factor(Collective::send_recv, 8) == 1.0);
  // 1 GB all-reduced over 8 ranks in 5 ms: algbw 200 GB/s, busbw 350 GB/s.
  CHECK(cuda::algorithm_bandwidth(1e9, 5e-3) == approx(200e9));
  CHECK(cuda::bus_bandwidth(Collective::all_reduce, 8, 1e9, 5e-3) == approx(350e9));
}

TEST_CASE("bus bandwidth: all-reduce factor is the ring all-reduce formula") {
  for (int n : {2, 3, 4, 8, 16}) {
    CAPTURE(n);
    CHECK(cuda::bus_factor(Collective::all_reduce, n) * 1e9 ==
          approx(formulas::ring_allreduce_bytes(1e9, n)));
  }
}

TEST_CASE("bus bandwidth: equals the link bandwidth at the cost model's beta time") {
  Hardware hw;
  hw.name = "link-only";
  hw.nvlink = {450e9, 0.0};  // no latency: collective_time is the bandwidth term alone
  const double bytes = 256e6;
  for (Collective c : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                       Collective::all_to_all, Collective::send_recv})
    for (int n : {2, 4, 8}) {
      CAPTURE(name_of(c));
      CAPTURE(n);
      const double t = *collective_time(c, n, bytes, hw);
      CHECK(cuda::bus_bandwidth(c, n, bytes, t) == approx(450e9));
    }
}
