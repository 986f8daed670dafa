// CUDA norms (rmsnorm, layernorm, their backward passes and the fused add + norm) against
// the CPU reference on the same inputs, for fp32, bf16 and fp16, on sizes that take the
// vector path (cols a multiple of 8) and the scalar path (odd cols).
#include <doctest/doctest.h>

#include "backends/cuda/kernels/norms.cuh"
#include "test_cuda_kernels_util.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

namespace {

constexpr float eps = 1e-5f;

template <class D>
void check_forward(int64_t rows, int64_t cols) {
  using H = host_t<D>;
  const auto x = random_values<H>(rows * cols, 1, -2.0f, 2.0f);
  const auto b = random_values<H>(rows * cols, 2);
  const auto gamma = random_values<H>(cols, 3, 0.5f, 1.5f);
  const auto beta = random_values<H>(cols, 4);
  DeviceBuffer<D> dx(x), db(b), dg(gamma), dbeta(beta), dy(rows * cols), dsum(rows * cols);
  std::vector<H> y(x.size()), sum(x.size());

  dy.poison();
  cuda::rmsnorm(dx.get(), dg.get(), dy.get(), rows, cols, eps, nullptr);
  cpu::rmsnorm(x.data(), gamma.data(), y.data(), rows, cols, eps);
  CHECK(normalized_error(dy.download(), y) <= tolerance<D>());

  dy.poison();
  cuda::layernorm(dx.get(), dg.get(), dbeta.get(), dy.get(), rows, cols, eps, nullptr);
  cpu::layernorm(x.data(), gamma.data(), beta.data(), y.data(), rows, cols, eps);
  CHECK(normalized_error(dy.download(), y) <= tolerance<D>());

  dy.poison();
  dsum.poison();
  cuda::add_rmsnorm(dx.get(), db.get(), dg.get(), dsum.get(), dy.get(), rows, cols, eps, nullptr);
  cpu::add_rmsnorm(x.data(), b.data(), gamma.data(), sum.data(), y.data(), rows, cols, eps);
  CHECK(normalized_error(dsum.download(), sum) <= tolerance<D>());
  CHECK(normalized_error(dy.download(), y) <= tolerance<D>());

  dy.poison();
  dsum.poison();
  cuda::add_layernorm(dx.get(), db.get(), dg.get(), dbeta.get(), dsum.get(), dy.get(), rows, cols,
                      eps, nullptr);
  cpu::add_layernorm(x.data(), b.data(), gamma.data(), beta.data(), sum.data(), y.data(), rows,
                     cols, eps);
  CHECK(normalized_error(dsum.download(), sum) <= tolerance<D>());
  CHECK(normalized_error(dy.download(), y) <= tolerance<D>());
}

template <class D>
void check_backward(int64_t rows, int64_t cols) {
  using H = host_t<D>;
  const auto x = random_values<H>(rows * cols, 5, -2.0f, 2.0f);
  const auto up = random_values<H>(rows * cols, 6);
  const auto gamma = random_values<H>(cols, 7, 0.5f, 1.5f);
  DeviceBuffer<D> d_x(x), d_up(up), d_g(gamma), d_dx(rows * cols), d_dg(cols), d_db(cols);
  DeviceBuffer<float> ws(cuda::norm_bwd_workspace_floats(rows, cols));
  std::vector<H> dx(x.size()), dg(gamma.size()), db(gamma.size());

  d_dx.poison();
  d_dg.poison();
  cuda::rmsnorm_bwd(d_x.get(), d_g.get(), d_up.get(), d_dx.get(), d_dg.get(), rows, cols, eps,
                    ws.get(), nullptr);
  cpu::rmsnorm_bwd(x.data(), gamma.data(), up.data(), dx.data(), dg.data(), rows, cols, eps);
  CHECK(normalized_error(d_dx.download(), dx) <= tolerance<D>());
  CHECK(normalized_error(d_dg.download(), dg) <= tolerance<D>());

  d_dx.poison();
  d_dg.poison();
  d_db.poison();
  cuda::layernorm_bwd(d_x.get(), d_g.get(), d_up.get(), d_dx.get(), d_dg.get(), d_db.get(), rows,
                      cols, eps, ws.get(), nullptr);
  cpu::layernorm_bwd(x.data(), gamma.data(), up.data(), dx.data(), dg.data(), db.data(), rows, cols,
                     eps);
  CHECK(normalized_error(d_dx.download(), dx) <= tolerance<D>());
  CHECK(normalized_error(d_dg.download(), dg) <= tolerance<D>());
  CHECK(normalized_error(d_db.download(), db) <= tolerance<D>());
}

}  // namespace

TEST_CASE_TEMPLATE("cuda kernels: norms match the CPU reference", D, float, __nv_bfloat16, __half) {
  SUBCASE("odd cols (scalar path)") { check_forward<D>(7, 1001); }
  SUBCASE("vector path") { check_forward<D>(33, 4096); }
  SUBCASE("wide rows") { check_forward<D>(3, 16384); }
}

TEST_CASE_TEMPLATE("cuda kernels: norm backward matches the CPU reference", D, float, __nv_bfloat16,
                   __half) {
  SUBCASE("odd cols") { check_backward<D>(7, 1000 + 1); }
  // More rows than partial blocks (512): several rows per block, summed in a fixed order.
  SUBCASE("rows > partial blocks") { check_backward<D>(1100, 256); }
  // Rows staged through the shared-memory ring by persistent blocks, several rows each.
  SUBCASE("llama-like rows, persistent blocks") { check_backward<D>(600, 4096); }
  // More rows than resident blocks, split unevenly; tiny rows (one warp per block).
  SUBCASE("uneven rows per block") { check_backward<D>(2003, 1024); }
  SUBCASE("tiny rows") { check_backward<D>(9, 24); }
  // 16-bit: 512 threads, a 3-stage ring; fp32: too wide for the ring (fallback).
  SUBCASE("8192 columns") { check_backward<D>(70, 8192); }
  // Too wide for one block's registers: the two-sweep kernels.
  SUBCASE("wide rows (two-sweep fallback)") { check_backward<D>(5, 8200); }
}

TEST_CASE("cuda kernels: norm backward is deterministic") {
  const int64_t rows = 1100, cols = 512;
  const auto x = random_values<float>(rows * cols, 8);
  const auto dy = random_values<float>(rows * cols, 9);
  const auto gamma = random_values<float>(cols, 10);
  DeviceBuffer<float> d_x(x), d_dy(dy), d_g(gamma), d_dx(rows * cols), d_dg(cols), d_db(cols);
  DeviceBuffer<float> ws(cuda::norm_bwd_workspace_floats(rows, cols));
  cuda::layernorm_bwd(d_x.get(), d_g.get(), d_dy.get(), d_dx.get(), d_dg.get(), d_db.get(), rows,
                      cols, eps, ws.get(), nullptr);
  const auto first = d_dg.download<float>();
  cuda::layernorm_bwd(d_x.get(), d_g.get(), d_dy.get(), d_dx.get(), d_dg.get(), d_db.get(), rows,
                      cols, eps, ws.get(), nullptr);
  CHECK(d_dg.download<float>() == first);
}

// The pipelined backward at every setting the benchmark sweeps (resident blocks per SM, rows
// per block reduction, packs per thread, blocks per cluster adding their partials), an odd
// row count so that a block's last step holds one row.
TEST_CASE_TEMPLATE("cuda kernels: pipelined norm backward matches the CPU reference at every setting", D,
                   float, __nv_bfloat16) {
  using H = host_t<D>;
  const int64_t rows = 601, cols = 1024;
  const auto x = random_values<H>(rows * cols, 11, -2.0f, 2.0f);
  const auto up = random_values<H>(rows * cols, 12);
  const auto gamma = random_values<H>(cols, 13, 0.5f, 1.5f);
  DeviceBuffer<D> d_x(x), d_up(up), d_g(gamma), d_dx(rows * cols), d_dg(cols), d_db(cols);
  DeviceBuffer<float> ws(cuda::norm_bwd_workspace_floats(rows, cols));
  std::vector<H> dx(x.size()), dg(gamma.size()), db(gamma.size()), rdx(x.size()), rdg(gamma.size());
  cpu::layernorm_bwd(x.data(), gamma.data(), up.data(), dx.data(), dg.data(), db.data(), rows, cols, eps);
  cpu::rmsnorm_bwd(x.data(), gamma.data(), up.data(), rdx.data(), rdg.data(), rows, cols, eps);
  for (const bool layer : {false, true})
    for (const int per_sm : {1, 2, 3})
      for (const int per_step : {1, 2})
        for (const int packs : {1, 2})
          for (const int cluster : {1, 2, 4}) {
            CAPTURE(layer);
            CAPTURE(per_sm);
            CAPTURE(per_step);
            CAPTURE(packs);
            CAPTURE(cluster);
            d_dx.poison();
            d_dg.poison();
            d_db.poison();
            const int64_t parts = cuda::detail::norm_bwd_pipelined(layer, d_x.get(), d_g.get(), d_up.get(), d_dx.get(),
                                                                   ws.get(), rows, cols, eps, nullptr, per_sm, per_step,
                                                                   packs, cluster);
            REQUIRE(parts > 0);
            CHECK(parts <= cuda::detail::norm_bwd_blocks(rows));
            cuda::detail::sum_partials(ws.get(), d_dg.get(), parts, cols, nullptr, layer ? d_db.get() : nullptr);
            CHECK(normalized_error(d_dx.download(), layer ? dx : rdx) <= tolerance<D>());
            CHECK(normalized_error(d_dg.download(), layer ? dg : rdg) <= tolerance<D>());
            if (layer) CHECK(normalized_error(d_db.download(), db) <= tolerance<D>());
          }
}

// Clusters on fewer rows than blocks per cluster (falls back to one block per cluster) and on
// a row count that is not a multiple of the cluster size; clustered sums are deterministic.
TEST_CASE("cuda kernels: clustered norm backward partials on few rows") {
  const int64_t cols = 2048;
  for (const int64_t rows : {int64_t{3}, int64_t{5}, int64_t{11}}) {
    CAPTURE(rows);
    const auto x = random_values<float>(rows * cols, 14, -2.0f, 2.0f);
    const auto up = random_values<float>(rows * cols, 15);
    const auto gamma = random_values<float>(cols, 16, 0.5f, 1.5f);
    DeviceBuffer<float> d_x(x), d_up(up), d_g(gamma), d_dx(rows * cols), d_dg(cols), d_db(cols);
    DeviceBuffer<float> ws(cuda::norm_bwd_workspace_floats(rows, cols));
    std::vector<float> dx(x.size()), dg(gamma.size()), db(gamma.size());
    cpu::layernorm_bwd(x.data(), gamma.data(), up.data(), dx.data(), dg.data(), db.data(), rows, cols, eps);
    d_dx.poison();
    d_dg.poison();
    d_db.poison();
    const int64_t parts = cuda::detail::norm_bwd_pipelined(true, d_x.get(), d_g.get(), d_up.get(), d_dx.get(), ws.get(),
                                                           rows, cols, eps, nullptr, 2, 1, 1, 4);
    REQUIRE(parts > 0);
    CHECK(parts <= cuda::detail::norm_bwd_blocks(rows));
    cuda::detail::sum_partials(ws.get(), d_dg.get(), parts, cols, nullptr, d_db.get());
    CHECK(normalized_error(d_dx.download(), dx) <= 1e-5);
    CHECK(normalized_error(d_dg.download(), dg) <= 1e-5);
    CHECK(normalized_error(d_db.download(), db) <= 1e-5);
    const auto first = d_dg.download<float>();
    const int64_t again = cuda::detail::norm_bwd_pipelined(true, d_x.get(), d_g.get(), d_up.get(), d_dx.get(), ws.get(),
                                                           rows, cols, eps, nullptr, 2, 1, 1, 4);
    cuda::detail::sum_partials(ws.get(), d_dg.get(), again, cols, nullptr, d_db.get());
    CHECK(d_dg.download<float>() == first);
  }
}
