// A small persistent thread pool for the CPU kernels: parallel_for splits [0, n) into
// chunks that the pool's threads and the caller take in turn. The CPU backend's
// OpenBLAS products run on this pool too (backends/cpu/blas.hpp), OpenBLAS itself single-threaded.
#pragma once
#include <cstdint>
#include <functional>

namespace perfsim::host {

// Threads that parallel_for uses, the caller included (hardware threads).
[[nodiscard]] int thread_count();

// Calls fn(begin, end) over disjoint chunks covering [0, n). Chunks hold at least `grain`
// items; when n <= grain, or when called from inside a chunk, everything runs inline.
// The first exception thrown by a chunk is rethrown to the caller.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace perfsim::host
