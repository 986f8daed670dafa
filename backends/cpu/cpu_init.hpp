// Values the CPU backend puts into persistent tensors before running a graph: random but
// sane (weights ~ N(0, 0.02), norm gains 1, token ids within the vocabulary, optimizer
// moments 0), so softmax, norms and AdamW stay finite however many times the graph runs.
#pragma once
#include <cstdint>
#include <vector>

#include "core/graph.hpp"

namespace perfsim::cpu {

enum class InitKind { normal, ones, zeros, token_ids };

struct InitSpec {
  InitKind kind = InitKind::normal;
  float stddev = 0.02f;  // normal
  int64_t vocab = 1;     // token_ids: uniform in [0, vocab)
};

// How tensor t of g is initialized.
[[nodiscard]] InitSpec init_spec(const Graph& g, const Tensor& t);

// Fills buffers[id] of every persistent tensor per init_spec; deterministic for a seed and
// a tensor name (independent of the thread count and of tensor ids).
void fill_persistent(const Graph& g, const std::vector<void*>& buffers, uint64_t seed);

}  // namespace perfsim::cpu
