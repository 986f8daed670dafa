// Token embedding lookup (a row gather from the table, plus learned positions as in GPT-2)
// and its backward, a scatter-add of the output gradient rows into the table. The backward
// splits the hidden dimension across threads, so no two threads touch the same element and
// the sums run in token order (deterministic).
#include <fmt/format.h>

#include <stdexcept>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"

namespace perfsim::cpu {

namespace {

int64_t checked_id(const int32_t* ids, int64_t t, int64_t vocab) {
  const int64_t id = ids[t];
  if (id < 0 || id >= vocab)
    throw std::out_of_range(fmt::format("embedding: token {} has id {} outside [0, {})", t, id, vocab));
  return id;
}

int64_t position_of(const EmbeddingShape& e, int64_t t) {
  const int64_t pos = e.position_of(t);
  if (pos >= e.max_positions)
    throw std::out_of_range(fmt::format("embedding: position {} exceeds the {} learned positions",
                                        pos, e.max_positions));
  return pos;
}

}  // namespace

template <class T>
void embedding(const int32_t* ids, const T* table, const std::type_identity_t<T>* positions, T* x, const EmbeddingShape& e) {
  const int64_t h = e.hidden;
  parallel_for(e.tokens, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(h, 1)),
               [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const T* row = table + checked_id(ids, t, e.vocab) * h;
      T* out = x + t * h;
      if (positions == nullptr) {
        std::copy(row, row + h, out);
      } else {
        const T* prow = positions + position_of(e, t) * h;
        for (int64_t c = 0; c < h; ++c) out[c] = from_f32<T>(to_f32(row[c]) + to_f32(prow[c]));
      }
    }
  });
}

template <class T>
void embedding_bwd(const int32_t* ids, const T* dx, T* dtable, std::type_identity_t<T>* dpositions, const EmbeddingShape& e) {
  const int64_t h = e.hidden;
  for (int64_t t = 0; t < e.tokens; ++t) checked_id(ids, t, e.vocab);  // fail before writing
  if (!e.accumulate) {
    std::fill(dtable, dtable + e.vocab * h, from_f32<T>(0.0f));
    if (dpositions != nullptr) std::fill(dpositions, dpositions + e.max_positions * h, from_f32<T>(0.0f));
  }
  constexpr int64_t col_block = 64;
  const int64_t blocks = (h + col_block - 1) / col_block;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * col_block, c1 = std::min(h, c0 + col_block);
      for (int64_t t = 0; t < e.tokens; ++t) {
        const T* g = dx + t * h;
        T* row = dtable + static_cast<int64_t>(ids[t]) * h;
        for (int64_t c = c0; c < c1; ++c) row[c] = from_f32<T>(to_f32(row[c]) + to_f32(g[c]));
        if (dpositions != nullptr) {
          T* prow = dpositions + position_of(e, t) * h;
          for (int64_t c = c0; c < c1; ++c) prow[c] = from_f32<T>(to_f32(prow[c]) + to_f32(g[c]));
        }
      }
    }
  });
}

#define PERFSIM_INSTANTIATE_EMBEDDING(T)                                                  \
  template void embedding<T>(const int32_t*, const T*, const T*, T*, const EmbeddingShape&); \
  template void embedding_bwd<T>(const int32_t*, const T*, T*, T*, const EmbeddingShape&);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_EMBEDDING)

}  // namespace perfsim::cpu
