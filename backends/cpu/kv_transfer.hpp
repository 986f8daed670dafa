// A disaggregated engine's KV hand-off on CPU ranks: the pages of some blocks of a session's
// pool (every layer's K and V, in name order) gathered into one message, sent over the ranks,
// and written into blocks of the receiver's pool. Both sides must hold the same page tensors
// (one model, one block size); a receiver whose pages differ in count or block size is refused.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/shared_tensors.hpp"
#include "core/run/communicator.hpp"

namespace perfsim::cpu {

// Throws NotExecutable when no pages are held yet or a block id is outside the pool.
void send_kv_pages(const SharedTensors& shared, const std::vector<int64_t>& blocks, Communicator& ranks, int peer);
void receive_kv_pages(SharedTensors& shared, const std::vector<int64_t>& blocks, Communicator& ranks, int peer);

}  // namespace perfsim::cpu
