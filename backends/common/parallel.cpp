// Persistent thread pool behind parallel_for (see parallel.hpp).
#include "backends/common/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace perfsim::host {

namespace {

thread_local bool t_inside_chunk = false;

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) m_workers.emplace_back([this] { worker(); });
  }
  ~Pool() {
    {
      std::lock_guard lk(m_mu);
      m_stop = true;
    }
    m_work.notify_all();
    for (auto& t : m_workers) t.join();
  }

  [[nodiscard]] int threads() const { return static_cast<int>(m_workers.size()) + 1; }

  // Returns false when another caller holds the pool (the work then runs inline).
  bool run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
    std::unique_lock submit(m_submit, std::try_to_lock);
    if (!submit.owns_lock()) return false;
    {
      std::lock_guard lk(m_mu);
      m_fn = &fn;
      m_n = n;
      m_chunk = chunk;
      m_next.store(0);
      m_error = nullptr;
      m_active = static_cast<int>(m_workers.size());
      ++m_generation;
    }
    m_work.notify_all();
    take_chunks();
    std::unique_lock lk(m_mu);
    m_done.wait(lk, [this] { return m_active == 0; });
    m_fn = nullptr;
    if (m_error) std::rethrow_exception(m_error);
    return true;
  }

 private:
  void take_chunks() {
    t_inside_chunk = true;
    for (;;) {
      const int64_t begin = m_next.fetch_add(m_chunk);
      if (begin >= m_n) break;
      try {
        (*m_fn)(begin, std::min(m_n, begin + m_chunk));
      } catch (...) {
        std::lock_guard lk(m_mu);
        if (!m_error) m_error = std::current_exception();
      }
    }
    t_inside_chunk = false;
  }

  void worker() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lk(m_mu);
        m_work.wait(lk, [&] { return m_stop || m_generation != seen; });
        if (m_stop) return;
        seen = m_generation;
      }
      take_chunks();
      std::lock_guard lk(m_mu);
      if (--m_active == 0) m_done.notify_one();
    }
  }

  std::vector<std::thread> m_workers;
  std::mutex m_submit;
  std::mutex m_mu;
  std::condition_variable m_work, m_done;
  const std::function<void(int64_t, int64_t)>* m_fn = nullptr;
  int64_t m_n = 0, m_chunk = 1;
  std::atomic<int64_t> m_next{0};
  std::exception_ptr m_error;
  uint64_t m_generation = 0;
  int m_active = 0;
  bool m_stop = false;
};

// Ranks of a parallel run started on this node share its cores (the launchers' local rank
// counts: OpenMPI, MPICH/PMI, Slurm).
unsigned ranks_on_this_node() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return static_cast<unsigned>(n);
    }
  return 1;
}

Pool& pool() {
  static Pool p(std::max(1u, std::thread::hardware_concurrency() / ranks_on_this_node()));
  return p;
}

}  // namespace

int thread_count() { return pool().threads(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain || t_inside_chunk || thread_count() == 1) {
    fn(0, n);
    return;
  }
  // A few chunks per thread balance uneven work (causal rows) without much overhead.
  const int64_t target = static_cast<int64_t>(thread_count()) * 4;
  const int64_t chunk = std::max(grain, (n + target - 1) / target);
  if (!pool().run(n, chunk, fn)) fn(0, n);
}

}  // namespace perfsim::host
