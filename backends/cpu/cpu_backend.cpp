// CpuBackend: device facts, what it can run, and the timed execution loop.
#include "backends/cpu/cpu_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "backends/cpu/buffer.hpp"
#include "backends/cpu/cpu_init.hpp"
#include "backends/cpu/cpu_op_exec.hpp"
#include "backends/cpu/cpu_op_shapes.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/scalar.hpp"
#include "core/errors.hpp"
#include "core/host_cpu.hpp"
#include "core/memory_model.hpp"

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

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool has_dtype(const Op& op, const Graph& g, DType t) {
  for (int id : op.inputs)
    if (g.tensor(id).dtype == t) return true;
  for (int id : op.outputs)
    if (g.tensor(id).dtype == t) return true;
  return false;
}

std::size_t bytes_of_tensor(const Tensor& t) {
  return static_cast<std::size_t>(t.elements()) * static_cast<std::size_t>(bytes_of(storage_of(t.dtype)));
}

}  // namespace

DeviceInfo CpuBackend::device() const {
  const HostCpuInfo cpu = read_host_cpu();
  DeviceInfo d;
  d.backend = "cpu";
  d.name = fmt::format("{} ({} threads)", cpu.model_name, thread_count());
  d.catalog_name = "host-cpu";
  d.compute_units = thread_count();
  d.memory_bytes = cpu.memory_bytes;
  d.l2_bytes = read_cache_bytes("/sys/devices/system/cpu/cpu0/cache/index2/size");
  d.clock_hz = cpu.ghz * 1e9;
  return d;
}

std::string CpuBackend::unsupported_reason(const Op& op, const Graph& g) const {
  if (op.kind == OpKind::collective) return "cpu backend runs one device: no collectives";
  if (op.kind == OpKind::host)
    return fmt::format("cpu backend does not run host ops ('{}'): they have no kernel to time", op.name);
  for (DType t : {DType::fp8, DType::int8}) {
    if (op.dtype != t && !has_dtype(op, g, t)) continue;
    if (op.kind == OpKind::gemm) return fmt::format("cpu backend has no {} GEMM", name_of(t));
    return fmt::format("cpu backend has no {} {} kernel", name_of(t), name_of(op.kind));
  }
  return {};
}

Measurement CpuBackend::run(const Graph& g, const RunOptions& o) {
  g.check();
  if (const std::string why = graph_unsupported_reason(*this, g); !why.empty()) throw NotExecutable(why);
  for (const Op& op : g.ops) check_op(op, g);

  // Free schedule shared with the memory model: activation id is released after op frees[i].
  const std::vector<int> last = last_use(g);
  std::vector<std::vector<int>> frees(g.ops.size());
  for (const Tensor& t : g.tensors) {
    const int l = last[static_cast<std::size_t>(t.id)];
    if (!is_persistent(t.role) && l >= 0) frees[static_cast<std::size_t>(l)].push_back(t.id);
  }

  TrackingAllocator alloc;
  std::vector<void*> buf(g.tensors.size(), nullptr);
  for (const Tensor& t : g.tensors)
    if (is_persistent(t.role)) buf[static_cast<std::size_t>(t.id)] = alloc.allocate(bytes_of_tensor(t), t.role);
  fill_persistent(g, buf, o.seed);

  const int warmup = std::max(0, o.warmup);
  const int repeats = std::max(1, o.repeats);
  std::vector<std::vector<double>> samples(g.ops.size());
  std::vector<double> walls;
  using clock = std::chrono::steady_clock;
  for (int run = 0; run < warmup + repeats; ++run) {
    const bool timed = run >= warmup;
    const auto wall0 = clock::now();
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      for (int id : op.outputs) {
        void*& p = buf[static_cast<std::size_t>(id)];
        if (p == nullptr) p = alloc.allocate(bytes_of_tensor(g.tensor(id)), g.tensor(id).role);
      }
      const auto t0 = clock::now();
      execute_op(op, g, buf, alloc);
      const auto t1 = clock::now();
      if (timed) samples[i].push_back(std::chrono::duration<double>(t1 - t0).count());
      for (int id : frees[i]) {
        alloc.release(buf[static_cast<std::size_t>(id)]);
        buf[static_cast<std::size_t>(id)] = nullptr;
      }
    }
    if (timed) walls.push_back(std::chrono::duration<double>(clock::now() - wall0).count());
  }

  Measurement m;
  m.backend = name();
  m.device = device().name;
  m.warmup = warmup;
  m.repeats = repeats;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    OpMeasurement om;
    om.op = op.id;
    om.median = median_of(samples[i]);
    om.min = samples[i].empty() ? 0 : *std::min_element(samples[i].begin(), samples[i].end());
    om.executed = true;
    m.ops.push_back(om);
    m.time_by_class[class_of(op.kind)] += om.median * op.count;
    m.step_time += om.median * op.count;
  }
  m.executed_wall = median_of(walls);
  m.peak_bytes = alloc.peak_bytes();
  for (TensorRole r : all_tensor_roles) m.bytes_by_role_at_peak[r] = 0;
  for (const auto& [r, b] : alloc.bytes_by_role_at_peak()) m.bytes_by_role_at_peak[r] = b;
  return m;
}

}  // namespace perfsim::cpu
