#include "backends/cpu/kv_transfer.hpp"

#include <fmt/format.h>

#include <cstring>

#include "core/errors.hpp"

namespace perfsim::cpu {

namespace {

constexpr int pages_tag = 43;

// The held pages, each block id checked against its pool.
std::vector<SharedTensors::Pages> pages_of(const SharedTensors& shared, const std::vector<int64_t>& blocks,
                                           const char* side) {
  std::vector<SharedTensors::Pages> pages = shared.kv_pages();
  if (pages.empty()) throw NotExecutable(fmt::format("cpu backend: no KV pages to {} yet", side));
  for (const SharedTensors::Pages& p : pages)
    for (int64_t b : blocks)
      if (b < 0 || b >= p.blocks)
        throw NotExecutable(fmt::format("cpu backend: KV block {} is outside the pool of {}", b, p.blocks));
  return pages;
}

std::size_t message_bytes(const std::vector<SharedTensors::Pages>& pages, std::size_t blocks) {
  std::size_t n = 0;
  for (const SharedTensors::Pages& p : pages) n += p.block_bytes * blocks;
  return n;
}

}  // namespace

void send_kv_pages(const SharedTensors& shared, const std::vector<int64_t>& blocks, Communicator& ranks, int peer) {
  const auto pages = pages_of(shared, blocks, "send");
  // One message: tensor by tensor, block by block (the receiver's order).
  std::vector<std::byte> message(message_bytes(pages, blocks.size()));
  std::byte* at = message.data();
  for (const SharedTensors::Pages& p : pages)
    for (int64_t b : blocks) {
      std::memcpy(at, p.data + static_cast<std::size_t>(b) * p.block_bytes, p.block_bytes);
      at += p.block_bytes;
    }
  ranks.send(message.data(), static_cast<int64_t>(message.size()), peer, pages_tag);
}

void receive_kv_pages(SharedTensors& shared, const std::vector<int64_t>& blocks, Communicator& ranks, int peer) {
  const auto pages = pages_of(shared, blocks, "receive into");
  std::vector<std::byte> message(message_bytes(pages, blocks.size()));
  ranks.recv(message.data(), static_cast<int64_t>(message.size()), peer, pages_tag);
  const std::byte* at = message.data();
  for (const SharedTensors::Pages& p : pages)
    for (int64_t b : blocks) {
      std::memcpy(p.data + static_cast<std::size_t>(b) * p.block_bytes, at, p.block_bytes);
      at += p.block_bytes;
    }
}

}  // namespace perfsim::cpu
