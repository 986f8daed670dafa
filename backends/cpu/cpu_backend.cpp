// CpuBackend: device facts, what it can run, and the timed execution loop.
#include "backends/cpu/cpu_backend.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "backends/cpu/cpu_collectives.hpp"
#include "backends/cpu/cpu_kernel_table.hpp"
#include "backends/cpu/cpu_graph_runner.hpp"
#include "backends/cpu/host_names.hpp"
#include "backends/common/measurement.hpp"
#include "backends/common/timed_runs.hpp"
#include "core/cost/host_cpu.hpp"
#include "core/errors.hpp"

namespace perfsim::cpu {

namespace {

// "512K" / "32768K" / "1M" from sysfs cache descriptions, in bytes (0 when unreadable).
double read_cache_bytes(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s.empty()) return 0;
  double scale = 1;
  if (s.back() == 'K') scale = 1024, s.pop_back();
  else if (s.back() == 'M') scale = 1024.0 * 1024, s.pop_back();
  try {
    return std::stod(s) * scale;
  } catch (...) {
    return 0;
  }
}

// Whether op has a tensor of dtype t, leaving out an fp8 KV cache of a kind that reads or
// writes one (has_fp8_kv_kernel).
bool has_dtype(const Op& op, const Graph& g, DType t) {
  const bool fp8_kv = has_fp8_kv_kernel(op.kind);
  for (const std::vector<int>* ids : {&op.inputs, &op.outputs})
    for (int id : *ids) {
      const Tensor& x = g.tensor(id);
      if (x.dtype == t && !(fp8_kv && is_fp8_kv_cache(x))) return true;
    }
  return false;
}

}  // namespace

DeviceInfo CpuBackend::device() const {
  const HostCpuInfo cpu = read_host_cpu();
  DeviceInfo d;
  d.backend = "cpu";
  d.name = fmt::format("{} ({} thread{})", cpu.model_name, thread_count(), thread_count() == 1 ? "" : "s");
  d.catalog_name = "host-cpu";
  d.compute_units = thread_count();
  d.memory_bytes = cpu.memory_bytes;
  d.l2_bytes = read_cache_bytes("/sys/devices/system/cpu/cpu0/cache/index2/size");
  d.clock_hz = cpu.ghz * 1e9;
  // What a calibrated profile records as its runtime: the BLAS build and the threads used.
  d.runtime = fmt::format("{} ({} thread{})", openblas_get_config(), thread_count(), thread_count() == 1 ? "" : "s");
  return d;
}

std::string CpuBackend::unsupported_reason(const Op& op, const Graph& g) const {
  if (op.kind == OpKind::collective)
    return m_ranks == nullptr ? "cpu backend runs one device here: collectives need ranks (mpirun, --gpus)"
                              : collective_unsupported_reason(op);
  if (op.kind == OpKind::host)
    return fmt::format("cpu backend does not run host ops ('{}'): they have no kernel to time", op.name);
  if (!has_kernel(op.kind)) return fmt::format("cpu backend has no {} kernel", name_of(op.kind));
  // A tensor-parallel rank holds heads/tp of the heads; which ones its slopes belong to depends
  // on its place in the group, which the kernels are not told.
  if (op.attrs.alibi_heads > 0 && op.attrs.heads != op.attrs.alibi_heads)
    return fmt::format("cpu backend: ALiBi attention '{}' holds {} of {} heads (a tensor-parallel rank); its "
                       "slopes are not placed yet",
                       op.name, op.attrs.heads, op.attrs.alibi_heads);
  // A GEMM on a quantized weight runs in int8 (W8A8) or the activations' type (weight-only).
  const bool quantized = op.kind == OpKind::gemm && op.inputs.size() > 1 && g.tensor(op.inputs[1]).quant_group > 0;
  for (DType t : {DType::fp8, DType::int8, DType::int4}) {
    if (op.dtype != t && !has_dtype(op, g, t)) continue;
    if (quantized && t != DType::fp8) continue;
    if (op.kind == OpKind::gemm) return fmt::format("cpu backend has no {} GEMM", name_of(t));
    return fmt::format("cpu backend has no {} {} kernel", name_of(t), name_of(op.kind));
  }
  return {};
}

Measurement CpuBackend::run(const Graph& g, const RunOptions& o) {
  if (const std::string why = graph_unsupported_reason(*this, g); !why.empty()) throw NotExecutable(why);
  GraphRunner runner(g, o.seed, m_ranks);

  const int warmup = std::max(0, o.warmup);
  for (int r = 0; r < warmup; ++r) runner.run_once();
  std::vector<std::vector<double>> samples(g.ops.size());
  std::vector<double> walls;
  std::vector<std::vector<double>> starts, ends;  // per timed run: each op's offsets in it
  TimedRuns runs(o.repeats, o.min_time);
  while (runs.next()) {
    const auto wall0 = std::chrono::steady_clock::now();
    starts.emplace_back();
    ends.emplace_back();
    runner.run_once(&samples, nullptr, &starts.back(), &ends.back());
    walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count());
  }

  // One queue, and the same cores copy and compute: nothing overlaps.
  Measurement m = summarize_runs(g, samples, walls, name(), device().name, warmup, runs.count(),
                                 /*copy_engines=*/false);
  keep_median_run(m, walls, starts, ends);
  const TrackingAllocator& alloc = runner.allocator();
  m.peak_bytes = alloc.peak_bytes();
  // Every role, as the memory model reports them, so the two breakdowns line up.
  for (TensorRole r : all_tensor_roles) m.bytes_by_role_at_peak[r] = 0;
  for (const auto& [r, b] : alloc.bytes_by_role_at_peak()) m.bytes_by_role_at_peak[r] = b;
  return m;
}

std::vector<std::vector<float>> CpuBackend::evaluate(const Graph& g, uint64_t seed, const std::vector<int>& ids,
                                                     const std::map<int, std::vector<int32_t>>& writes) {
  if (const std::string why = graph_unsupported_reason(*this, g); !why.empty()) throw NotExecutable(why);
  GraphRunner runner(g, seed, m_ranks);
  for (const auto& [id, values] : writes) runner.write(id, values);
  std::vector<char> keep(g.tensors.size(), 0);
  for (int id : ids) keep.at(static_cast<std::size_t>(id)) = 1;
  runner.run_once(nullptr, &keep);
  std::vector<std::vector<float>> out;
  out.reserve(ids.size());
  for (int id : ids) out.push_back(runner.read(id));
  return out;
}

}  // namespace perfsim::cpu
