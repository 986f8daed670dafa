// CUDA elementwise kernels (gelu, silu_mul, residual_add, their backward passes, rope) against
// the CPU reference, for fp32, bf16 and fp16: a length with a vector tail, and pointers offset
// by one element (not 16-byte aligned) to take the scalar path.
#include <doctest/doctest.h>

#include "backends/cuda/kernels/pointwise.cuh"
#include "test_cuda_kernels_util.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

namespace {

template <class D>
void check_pointwise(int64_t n, int64_t offset) {
  using H = host_t<D>;
  const auto a = random_values<H>(n + offset, 11, -4.0f, 4.0f);
  const auto b = random_values<H>(n + offset, 12);
  const auto c = random_values<H>(n + offset, 13);
  DeviceBuffer<D> da(a), db(b), dc(c), dy(n + offset), dz(n + offset);
  std::vector<H> y(a.size(), host::from_f32<H>(0.0f)), z(a.size(), host::from_f32<H>(0.0f));
  const auto got = [&](const DeviceBuffer<D>& buf) {
    auto v = buf.download();
    return std::vector<H>(v.begin() + offset, v.end());
  };
  const auto want = [&](const std::vector<H>& v) { return std::vector<H>(v.begin() + offset, v.end()); };
  const int64_t o = offset;

  dy.poison();
  cuda::gelu(da.get() + o, dy.get() + o, n, nullptr);
  cpu::gelu(a.data() + o, y.data() + o, n);
  CHECK(normalized_error(got(dy), want(y)) <= tolerance<D>());

  dy.poison();
  cuda::gelu_bwd(da.get() + o, db.get() + o, dy.get() + o, n, nullptr);
  cpu::gelu_bwd(a.data() + o, b.data() + o, y.data() + o, n);
  CHECK(normalized_error(got(dy), want(y)) <= tolerance<D>());

  dy.poison();
  cuda::silu_mul(da.get() + o, db.get() + o, dy.get() + o, n, nullptr);
  cpu::silu_mul(a.data() + o, b.data() + o, y.data() + o, n);
  CHECK(normalized_error(got(dy), want(y)) <= tolerance<D>());

  dy.poison();
  dz.poison();
  cuda::silu_mul_bwd(da.get() + o, db.get() + o, dc.get() + o, dy.get() + o, dz.get() + o, n, nullptr);
  cpu::silu_mul_bwd(a.data() + o, b.data() + o, c.data() + o, y.data() + o, z.data() + o, n);
  CHECK(normalized_error(got(dy), want(y)) <= tolerance<D>());
  CHECK(normalized_error(got(dz), want(z)) <= tolerance<D>());

  dy.poison();
  cuda::residual_add(da.get() + o, db.get() + o, dy.get() + o, n, nullptr);
  cpu::residual_add(a.data() + o, b.data() + o, y.data() + o, n);
  CHECK(normalized_error(got(dy), want(y)) <= tolerance<D>());
}

template <class D>
void check_rope(const ops::RopeShape& r) {
  using H = host_t<D>;
  const int64_t n = r.tokens * r.heads * r.head_dim;
  const auto x = random_values<H>(n, 14);
  DeviceBuffer<D> dx(x), dy(n);
  std::vector<H> y(x.size());
  dy.poison();
  cuda::rope(dx.get(), dy.get(), r, nullptr);
  cpu::rope(x.data(), y.data(), r);
  CHECK(normalized_error(dy.download(), y) <= tolerance<D>());
  dy.poison();
  cuda::rope_bwd(dx.get(), dy.get(), r, nullptr);
  cpu::rope_bwd(x.data(), y.data(), r);
  CHECK(normalized_error(dy.download(), y) <= tolerance<D>());
}

}  // namespace

TEST_CASE_TEMPLATE("cuda kernels: elementwise ops match the CPU reference", D, float,
                   __nv_bfloat16, __half) {
  SUBCASE("aligned, with a tail") { check_pointwise<D>(1000003, 0); }
  SUBCASE("unaligned (scalar path)") { check_pointwise<D>(4099, 1); }
}

TEST_CASE_TEMPLATE("cuda kernels: rope matches the CPU reference", D, float, __nv_bfloat16, __half) {
  // Positions in the thousands: angles need double precision to stay accurate in fp32.
  SUBCASE("llama-like heads") { check_rope<D>({.tokens = 37, .heads = 3, .head_dim = 128, .seq = 5, .position = 4000}); }
  // Few heads over many tokens (blocks of fewer threads than pairs: each forms several
  // cos/sin), positions wrapping every 300 tokens, angles in the hundreds of thousands of radians.
  SUBCASE("grouped K heads, far positions") {
    check_rope<D>({.tokens = 1001, .heads = 2, .head_dim = 64, .seq = 300, .position = 250000});
  }
  SUBCASE("odd head_dim") { check_rope<D>({.tokens = 9, .heads = 2, .head_dim = 7, .seq = 9, .position = 0}); }
}
