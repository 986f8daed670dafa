// Data movement: appending new K/V rows into a preallocated (or paged) cache, in the op's type or
// quantized into an fp8 one, taking each sequence's last row (the only one decode/prefill needs
// logits for), and plain copies.
#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"

namespace perfsim::cpu {

template <class T, class C>
void kv_append(const T* k_new, C* cache, const KvAppendShape& s) {
  detail::check_kv_storage<C>(s.kv, "kv_append");
  if (s.position < 0 || s.position + s.seq_new > s.capacity)
    throw std::out_of_range(fmt::format("kv_append: rows {}..{} do not fit a cache of {} rows",
                                        s.position, s.position + s.seq_new - 1, s.capacity));
  for (int64_t b = 0; b < s.batch; ++b)
    detail::store_kv_row(k_new + b * s.seq_new * s.row, s.seq_new * s.row, s.kv.scale,
                         cache + (b * s.capacity + s.position) * s.row);
}

template <class T, class C>
void paged_kv_append(const T* k_new, C* pages, const int32_t* table, const KvAppendShape& s,
                     const PagedLayout& p) {
  detail::check_kv_storage<C>(s.kv, "paged kv_append");
  if (s.position < 0 || s.position + s.seq_new > p.block * p.max_blocks)
    throw std::out_of_range(fmt::format("kv_append: rows {}..{} do not fit {} pages of {} rows",
                                        s.position, s.position + s.seq_new - 1, p.max_blocks, p.block));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.seq_new; ++t)
      detail::store_kv_row(k_new + (b * s.seq_new + t) * s.row, s.row, s.kv.scale,
                           pages + paged_row(table, p, b, s.position + t) * s.row);
}

template <class T>
void slice_last_token(const T* x, T* y, int64_t batch, int64_t seq, int64_t cols) {
  for (int64_t b = 0; b < batch; ++b)
    std::memcpy(y + b * cols, x + ((b + 1) * seq - 1) * cols, static_cast<std::size_t>(cols) * sizeof(T));
}

void copy_tensor(const void* x, Storage x_type, void* y, Storage y_type, int64_t n) {
  if (x_type == y_type) {
    // Several threads copy disjoint ranges: one thread rarely saturates memory bandwidth.
    const int64_t bytes = n * bytes_of(x_type);
    parallel_for(bytes, 1 << 20, [&](int64_t b, int64_t e) {
      std::memcpy(static_cast<char*>(y) + b, static_cast<const char*>(x) + b, static_cast<std::size_t>(e - b));
    });
    return;
  }
  parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
    convert(static_cast<const char*>(x) + b * bytes_of(x_type), x_type,
            static_cast<char*>(y) + b * bytes_of(y_type), y_type, e - b);
  });
}

#define PERFSIM_INSTANTIATE_KV_APPEND(T, C)                                 \
  template void kv_append<T, C>(const T*, C*, const KvAppendShape&);        \
  template void paged_kv_append<T, C>(const T*, C*, const int32_t*, const KvAppendShape&, const PagedLayout&);
PERFSIM_CPU_INSTANTIATE_KV(PERFSIM_INSTANTIATE_KV_APPEND)

#define PERFSIM_INSTANTIATE_MEMORY(T) template void slice_last_token<T>(const T*, T*, int64_t, int64_t, int64_t);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_MEMORY)

}  // namespace perfsim::cpu
