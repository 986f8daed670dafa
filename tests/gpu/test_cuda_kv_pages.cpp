// The KV hand-off's gather and scatter kernels (backends/cuda/kernels/kv_pages.cuh) against a
// host copy laid out as cpu::send_kv_pages lays its message out: tensor by tensor, block by block.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "backends/cuda/kernels/kv_pages.cuh"
#include "test_cuda_kernels_util.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

TEST_CASE("cuda kernels: KV pages gathered into a message and scattered into other blocks") {
  // 48 bytes a block: 16-byte copies; 6: byte copies.
  for (const std::size_t block_bytes : {std::size_t{48}, std::size_t{6}}) {
    CAPTURE(block_bytes);
    constexpr int64_t tensors = 3, pool = 9;
    const std::vector<int64_t> from{4, 0, 7, 2}, into{1, 8, 3, 5};
    const auto n = static_cast<int64_t>(from.size());
    std::mt19937 rng(5);
    std::vector<std::vector<uint8_t>> pages(tensors, std::vector<uint8_t>(pool * block_bytes));
    std::vector<std::unique_ptr<DeviceBuffer<uint8_t>>> sent, taken;
    std::vector<uint64_t> sent_at, taken_at;
    for (auto& p : pages) {
      for (auto& b : p) b = static_cast<uint8_t>(rng());
      sent.push_back(std::make_unique<DeviceBuffer<uint8_t>>(p));
      taken.push_back(std::make_unique<DeviceBuffer<uint8_t>>(static_cast<int64_t>(p.size())));
      taken.back()->poison();
      sent_at.push_back(reinterpret_cast<uint64_t>(sent.back()->get()));
      taken_at.push_back(reinterpret_cast<uint64_t>(taken.back()->get()));
    }
    DeviceBuffer<uint64_t> d_sent(sent_at), d_taken(taken_at);
    DeviceBuffer<int64_t> d_from(from), d_into(into);
    DeviceBuffer<uint8_t> message(tensors * n * static_cast<int64_t>(block_bytes));
    message.poison();
    cuda::gather_kv_pages(reinterpret_cast<void* const*>(d_sent.get()), d_from.get(), tensors, n, block_bytes,
                          message.get(), nullptr);
    std::vector<uint8_t> expected;
    for (const auto& p : pages)
      for (int64_t b : from)
        expected.insert(expected.end(), p.begin() + b * static_cast<int64_t>(block_bytes),
                        p.begin() + (b + 1) * static_cast<int64_t>(block_bytes));
    CHECK(message.download<uint8_t>() == expected);

    cuda::scatter_kv_pages(reinterpret_cast<void* const*>(d_taken.get()), d_into.get(), tensors, n, block_bytes,
                           message.get(), nullptr);
    for (int64_t t = 0; t < tensors; ++t) {
      const std::vector<uint8_t> got = taken[static_cast<std::size_t>(t)]->download<uint8_t>();
      for (int64_t k = 0; k < n; ++k) {
        CAPTURE(t);
        CAPTURE(k);
        const auto at = static_cast<std::ptrdiff_t>(into[static_cast<std::size_t>(k)] * block_bytes);
        const auto src = static_cast<std::ptrdiff_t>(from[static_cast<std::size_t>(k)] * block_bytes);
        const auto& p = pages[static_cast<std::size_t>(t)];
        CHECK(std::equal(got.begin() + at, got.begin() + at + static_cast<std::ptrdiff_t>(block_bytes),
                         p.begin() + src));
      }
      CHECK(got[0] == 0xFF);  // block 0 is not among `into`: untouched
    }
  }
}
