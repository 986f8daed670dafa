// NCCL collectives across the visible GPUs: each collective's result checked element by element
// against the value computed on the host from the rank-dependent inputs, and the timed run's
// bandwidth fields checked against their definitions. Needs NCCL and at least 2 GPUs; with
// fewer the cases say so and return.
#include <doctest/doctest.h>

#include <cstdlib>
#include <functional>
#include <vector>

#include "approx.hpp"
#include "backends/cuda/bus_bandwidth.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/nccl_collectives.hpp"
#include "backends/cuda/nccl_comm.hpp"
#include "core/calibrate/fit.hpp"
#include "core/errors.hpp"
#include "core/validate/collectives.hpp"
#include "core/validate/validation.hpp"
#include "gpu_test_util.hpp"

using perfsim::test::approx;

namespace perfsim::cuda {
namespace {

using test::DeviceBuffer;

// True (after a doctest message) when this machine cannot run a multi-GPU collective.
bool cannot_run_collectives() {
  if (!nccl_available()) {
    MESSAGE("perfsim built without NCCL: collective tests skipped");
    return true;
  }
  if (device_count() < 2) {
    MESSAGE("fewer than 2 GPUs visible: collective tests skipped");
    return true;
  }
  // NVLink SHARP (multicast) stays off unless the caller chose otherwise: the cost model prices
  // ring algorithms, and some shared hosts forbid multicast.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  return false;
}

// Runs one collective with `count` elements per block on every rank: rank r sends send_of(r)
// (as H, the host twin of dtype t); returns each rank's receive buffer as floats. Receive
// buffers start as NaN bytes, so an element NCCL does not write fails the comparison.
template <class H>
std::vector<std::vector<float>> run_collective(const NcclComm& comm, Collective c, DType t,
                                               std::size_t count,
                                               const std::function<float(int rank, std::size_t i)>& send_of) {
  const int n = comm.size();
  const BufferElements e = buffer_elements(c, n, count);
  std::vector<std::vector<float>> out(static_cast<std::size_t>(n));
  comm.for_each_rank([&](const RankContext& ctx) {
    std::vector<float> host(e.send);
    for (std::size_t i = 0; i < e.send; ++i) host[i] = send_of(ctx.rank, i);
    DeviceBuffer send = test::to_device(test::to_storage<H>(host));
    DeviceBuffer recv = test::poisoned<H>(e.recv);
    // The uploads ran on the legacy stream, which the rank's non-blocking stream does not wait for.
    PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
    enqueue_collective(ctx, c, t, send.get(), recv.get(), count);
    PERFSIM_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    out[static_cast<std::size_t>(ctx.rank)] = test::to_floats(test::from_device<H>(recv, e.recv));
  });
  return out;
}

// Odd, so no block is a multiple of a vector width or an NCCL chunk.
constexpr std::size_t count = 1001;

}  // namespace

// Inputs are small integers, so every sum is exact in fp32 and bf16 whatever order NCCL adds
// in: results must match exactly.
TEST_CASE("nccl all_reduce sums rank-dependent data (fp32 and bf16)") {
  if (cannot_run_collectives()) return;
  NcclComm comm = NcclComm::over_visible();
  const int n = comm.size();
  auto send = [](int r, std::size_t i) { return static_cast<float>((r + 1) * static_cast<int>(i % 7) + r); };
  std::vector<float> want(count, 0.f);
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i) want[i] += send(r, i);
  const auto f32 = run_collective<float>(comm, Collective::all_reduce, DType::fp32, count, send);
  const auto b16 = run_collective<host::bf16>(comm, Collective::all_reduce, DType::bf16, count, send);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(f32[static_cast<std::size_t>(r)] == want);
    CHECK(b16[static_cast<std::size_t>(r)] == want);
  }
}

TEST_CASE("nccl all_gather places rank i's block at block i") {
  if (cannot_run_collectives()) return;
  NcclComm comm = NcclComm::over_visible();
  const int n = comm.size();
  auto send = [](int r, std::size_t i) { return static_cast<float>(r * 10000 + static_cast<int>(i)); };
  const auto got = run_collective<float>(comm, Collective::all_gather, DType::fp32, count, send);
  std::vector<float> want;
  for (int b = 0; b < n; ++b)
    for (std::size_t i = 0; i < count; ++i) want.push_back(send(b, i));
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(got[static_cast<std::size_t>(r)] == want);
  }
}

TEST_CASE("nccl reduce_scatter gives rank r the sum of every rank's block r") {
  if (cannot_run_collectives()) return;
  NcclComm comm = NcclComm::over_visible();
  const int n = comm.size();
  // Element i of block b on rank r: (r+1)·(b+1) + i mod 5.
  auto send = [](int r, std::size_t i) {
    const auto b = static_cast<int>(i / count), k = static_cast<int>(i % count);
    return static_cast<float>((r + 1) * (b + 1) + k % 5);
  };
  const auto got = run_collective<float>(comm, Collective::reduce_scatter, DType::fp32, count, send);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    std::vector<float> want(count, 0.f);
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < count; ++i) want[i] += send(q, static_cast<std::size_t>(r) * count + i);
    CHECK(got[static_cast<std::size_t>(r)] == want);
  }
}

TEST_CASE("nccl all_to_all sends block j to rank j") {
  if (cannot_run_collectives()) return;
  NcclComm comm = NcclComm::over_visible();
  const int n = comm.size();
  // Element i of block j on rank r: r·1000 + j·100 + i mod 50 (which sender, which block).
  auto send = [](int r, std::size_t i) {
    const auto j = static_cast<int>(i / count), k = static_cast<int>(i % count);
    return static_cast<float>(r * 1000 + j * 100 + k % 50);
  };
  const auto got = run_collective<float>(comm, Collective::all_to_all, DType::fp32, count, send);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    std::vector<float> want;
    for (int from = 0; from < n; ++from)
      for (std::size_t i = 0; i < count; ++i) want.push_back(send(from, static_cast<std::size_t>(r) * count + i));
    CHECK(got[static_cast<std::size_t>(r)] == want);
  }
}

TEST_CASE("nccl send_recv ring: rank r receives rank r-1's buffer") {
  if (cannot_run_collectives()) return;
  NcclComm comm = NcclComm::over_visible();
  const int n = comm.size();
  auto send = [](int r, std::size_t i) { return static_cast<float>(r * 1000 + static_cast<int>(i % 999)); };
  const auto got = run_collective<float>(comm, Collective::send_recv, DType::fp32, count, send);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    const int prev = (r + n - 1) % n;
    std::vector<float> want(count);
    for (std::size_t i = 0; i < count; ++i) want[i] = send(prev, i);
    CHECK(got[static_cast<std::size_t>(r)] == want);
  }
}

TEST_CASE("nccl timed collective: sizes and bandwidths follow the nccl-tests definitions") {
  if (cannot_run_collectives()) return;
  NcclComm comm = NcclComm::over_visible();
  const int n = comm.size();
  // 1 MiB all-gather of fp32: blocks of 1 MiB / (n · 4) elements, output = the whole 1 MiB.
  CollectiveSpec spec;
  spec.op = Collective::all_gather;
  spec.bytes = std::size_t{1} << 20;
  spec.warmup = 2;
  spec.repeats = 5;
  const CollectiveResult r = time_collective(comm, spec);
  CHECK(r.ranks == n);
  CHECK(r.count == (std::size_t{1} << 20) / (static_cast<std::size_t>(n) * 4));
  CHECK(r.bytes == r.count * static_cast<std::size_t>(n) * 4);
  CHECK(r.time > 0);
  CHECK(r.min_time <= r.time);
  CHECK(r.batch >= 1);
  CHECK(r.algbw == approx(static_cast<double>(r.bytes) / r.time));
  CHECK(r.busbw == approx(r.algbw * (n - 1.0) / n));
}

// What `perfsim validate` does with 2 or more GPUs: every collective timed at its 6 sizes over
// each group, then priced by a profile fitted the way calibrate fits one (all-reduce over 2
// GPUs, 8 KiB to 1 GiB). Loose bounds: timings move by tens of percent at the smallest sizes.
TEST_CASE("cuda backend: validate's collectives, timed and priced by a fitted profile") {
  if (cannot_run_collectives()) return;
  CudaBackend be;
  const CollectiveMeasurements m = measure_collectives(be, nullptr);
  CHECK(m.skipped.empty());
  int groups = 0;
  for (int g = 2; g <= be.gpu_count(); g *= 2) ++groups;
  REQUIRE(m.points.size() == static_cast<std::size_t>(groups) * 5 * collective_validation_payloads().size());
  for (std::size_t i = 0; i < m.points.size(); i += 6) {
    CAPTURE(name_of(m.points[i].collective));
    CHECK(m.points[i].seconds > 0);
    CHECK(m.points[i + 5].seconds > m.points[i].seconds);  // 768 MiB takes longer than 24 KiB
  }

  const std::vector<double> sizes = {8 << 10, 64 << 10, 512 << 10, 4 << 20, 32 << 20, 256 << 20, 1 << 30};
  Hardware hw;
  hw.calibration.collectives[{Collective::all_reduce, 2}] =
      fit_collective(Collective::all_reduce, 2, sizes, be.time_collective(Collective::all_reduce, 2, sizes));
  ValidationSummary s;
  add_collective_errors(s, m, hw);
  REQUIRE(!s.collectives.empty());
  CHECK(s.collectives[0].collective == Collective::all_reduce);
  MESSAGE("all_reduce over 2 GPUs, median |error| " << s.collectives[0].stats.median);
  CHECK(s.collectives[0].stats.median < 0.3);
}

TEST_CASE("nccl communicator refuses a GPU listed twice") {
  if (!nccl_available()) {
    MESSAGE("perfsim built without NCCL: skipped");
    return;
  }
  CHECK_THROWS_AS(NcclComm({0, 0}), NotExecutable);
}

}  // namespace perfsim::cuda
