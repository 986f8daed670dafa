// NcclComm: communicator creation (ncclCommInitAll), per-rank streams, one thread per rank,
// and teardown. Everything NCCL-specific sits behind PERFSIM_HAVE_NCCL.
#include "backends/cuda/nccl_comm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <thread>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

bool nccl_available() {
#ifdef PERFSIM_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

std::string nccl_version() {
#ifdef PERFSIM_HAVE_NCCL
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // Codes are MAJOR*10000 + MINOR*100 + PATCH since NCCL 2.9 (MAJOR*1000 + ... before).
  if (v >= 10000) return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
  return fmt::format("{}.{}.{}", v / 1000, (v / 100) % 10, v % 100);
#else
  return "";
#endif
}

NcclComm::NcclComm(std::vector<int> devices) {
#ifndef PERFSIM_HAVE_NCCL
  (void)devices;
  throw NotExecutable("collectives need NCCL, and perfsim was built without it (install NCCL "
                      "and reconfigure; cmake prints 'perfsim: NCCL <path>' when it is found)");
#else
  const int visible = device_count();
  if (devices.empty()) throw NotExecutable("an NCCL communicator needs at least one GPU");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const int d = devices[i];
    if (d < 0 || d >= visible)
      throw NotExecutable(fmt::format("GPU {} is not visible ({} visible)", d, visible));
    if (std::find(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(i), d) !=
        devices.begin() + static_cast<std::ptrdiff_t>(i))
      throw NotExecutable(fmt::format("GPU {} is listed twice: NCCL needs one rank per GPU", d));
  }
  m_ranks.resize(devices.size());
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  PERFSIM_NCCL_CHECK(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
  for (std::size_t i = 0; i < devices.size(); ++i) {
    m_ranks[i].device = devices[i];
    m_ranks[i].comm = comms[i];
    PERFSIM_CUDA_CHECK(cudaSetDevice(devices[i]));
    // Non-blocking: the legacy default stream must not serialize a rank's collectives.
    PERFSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&m_ranks[i].stream, cudaStreamNonBlocking));
  }
#endif
}

NcclComm NcclComm::over_visible(int count) {
  const int visible = device_count();
  const int n = count <= 0 ? visible : count;
  if (n > visible)
    throw NotExecutable(fmt::format("asked for {} GPUs, {} visible", n, visible));
  std::vector<int> devices(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) devices[static_cast<std::size_t>(i)] = i;
  return NcclComm(std::move(devices));
}

NcclComm::NcclComm(NcclComm&& o) noexcept : m_ranks(std::move(o.m_ranks)) { o.m_ranks.clear(); }

NcclComm::~NcclComm() {
  if (m_ranks.empty()) return;
  // One thread per rank: destroying several communicators of one clique from a single thread
  // may wait on peers whose destroy has not been called yet. Errors are ignored (destructor).
  std::vector<std::thread> threads;
  threads.reserve(m_ranks.size());
  for (const Rank& r : m_ranks)
    threads.emplace_back([r] {
      if (cudaSetDevice(r.device) != cudaSuccess) return;
#ifdef PERFSIM_HAVE_NCCL
      if (r.comm != nullptr) (void)ncclCommDestroy(static_cast<ncclComm_t>(r.comm));
#endif
      if (r.stream != nullptr) (void)cudaStreamDestroy(r.stream);
    });
  for (std::thread& t : threads) t.join();
}

void NcclComm::for_each_rank(const std::function<void(const RankContext&)>& fn) const {
  const int n = size();
  std::barrier<> ranks_barrier(n);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      const Rank& r = m_ranks[static_cast<std::size_t>(i)];
      try {
        PERFSIM_CUDA_CHECK(cudaSetDevice(r.device));
        RankContext ctx;
        ctx.rank = i;
        ctx.ranks = n;
        ctx.device = r.device;
        ctx.stream = r.stream;
#ifdef PERFSIM_HAVE_NCCL
        ctx.comm = static_cast<ncclComm_t>(r.comm);
#endif
        ctx.ranks_barrier = &ranks_barrier;
        fn(ctx);
      } catch (...) {
        errors[static_cast<std::size_t>(i)] = std::current_exception();
        ranks_barrier.arrive_and_drop();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace perfsim::cuda
