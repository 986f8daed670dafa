// CUPTI activity records of graph replays (see kernel_trace.hpp).
#include "backends/cuda/kernel_trace.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "backends/cuda/cuda_check.hpp"

#ifdef PERFSIM_HAVE_CUPTI
#include <cupti.h>
#endif

namespace perfsim::cuda {

namespace {

struct TraceState {
  std::mutex mu;
  std::unordered_map<uint64_t, uint64_t> original_of;  // node id of a clone -> captured node's id
  std::vector<TraceRecord> records;
  std::string why;
};

TraceState& state() {
  static TraceState s;
  return s;
}

constexpr const char* timing_choice = "PERFSIM_OP_TIMING";

#ifdef PERFSIM_HAVE_CUPTI
constexpr std::size_t buffer_bytes = std::size_t{8} << 20;
// Only the device's work: recording API calls too (CUPTI_ACTIVITY_KIND_RUNTIME or DRIVER)
// slowed every later launch of the process by several µs on an H100 (PERFORMANCE.md, run 84).
constexpr CUpti_ActivityKind traced_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};

std::string cupti_message(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s != nullptr ? s : fmt::format("CUPTI error {}", static_cast<int>(r));
}

void check(CUptiResult r, const char* call) {
  if (r != CUPTI_SUCCESS) throw CudaError(fmt::format("{} failed: {}", call, cupti_message(r)));
}

// Caller holds the lock. A node cloned from a clone maps to the first captured node.
uint64_t captured_node(const TraceState& s, uint64_t id) {
  const auto it = s.original_of.find(id);
  return it == s.original_of.end() ? id : it->second;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, buffer_bytes));
  *size = *buffer != nullptr ? buffer_bytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, std::size_t, std::size_t valid) {
  TraceState& s = state();
  {
    const std::lock_guard<std::mutex> lock(s.mu);
    CUpti_Activity* r = nullptr;
    auto keep = [&](uint64_t start, uint64_t end, uint64_t node) {
      s.records.push_back({start, end, node != 0 ? captured_node(s, node) : 0});
    };
    while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
      if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
        keep(k->start, k->end, k->graphNodeId);
      } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
        keep(c->start, c->end, c->graphNodeId);
      } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
        keep(m->start, m->end, m->graphNodeId);
      }
    }
  }
  std::free(buffer);
}

// Instantiating a graph clones its nodes; records name the clones.
void CUPTIAPI on_resource(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || id != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) return;
  const auto* graph = static_cast<const CUpti_GraphData*>(static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor);
  uint64_t clone = 0, original = 0;
  if (cuptiGetGraphNodeId(graph->node, &clone) != CUPTI_SUCCESS ||
      cuptiGetGraphNodeId(graph->originalNode, &original) != CUPTI_SUCCESS)
    return;
  TraceState& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  s.original_of[clone] = captured_node(s, original);
}

KernelTrace* subscribe(KernelTrace* made) {
  TraceState& s = state();
  CUpti_SubscriberHandle subscriber = nullptr;
  if (const CUptiResult r = cuptiSubscribe(&subscriber, on_resource, nullptr); r != CUPTI_SUCCESS) {
    s.why = fmt::format("cuptiSubscribe failed: {}", cupti_message(r));
    return nullptr;
  }
  CUptiResult r = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
  if (r == CUPTI_SUCCESS) r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    s.why = fmt::format("CUPTI refused its callbacks: {}", cupti_message(r));
    (void)cuptiUnsubscribe(subscriber);
    return nullptr;
  }
  return made;
}
#endif

}  // namespace

bool KernelTrace::requested() {
  const char* v = std::getenv(timing_choice);
  const std::string mode = v != nullptr ? v : "";
  if (mode.empty() || mode == "events") return false;
  if (mode == "cupti") return true;
  throw std::runtime_error(fmt::format("{}={} is not a timing method: use cupti or events", timing_choice, mode));
}

KernelTrace* KernelTrace::get() {
  static KernelTrace* const instance = []() -> KernelTrace* {
#ifdef PERFSIM_HAVE_CUPTI
    static KernelTrace trace;
    KernelTrace* t = subscribe(&trace);
#else
    state().why = "built without CUPTI";
    KernelTrace* t = nullptr;
#endif
    if (t == nullptr && requested())  // said once per process
      fmt::print(stderr, "perfsim: cuda backend: {}=cupti, but CUPTI cannot be used here ({}); timing with events\n",
                 timing_choice, state().why);
    return t;
  }();
  return instance;
}

const std::string& KernelTrace::why() { return state().why; }

uint64_t KernelTrace::node_id(cudaGraphNode_t node) {
  uint64_t id = 0;
#ifdef PERFSIM_HAVE_CUPTI
  check(cuptiGetGraphNodeId(reinterpret_cast<CUgraphNode>(node), &id), "cuptiGetGraphNodeId");
#else
  (void)node;
#endif
  return id;
}

void KernelTrace::begin() {
  {
    TraceState& s = state();
    const std::lock_guard<std::mutex> lock(s.mu);
    s.records.clear();
  }
#ifdef PERFSIM_HAVE_CUPTI
  for (CUpti_ActivityKind k : traced_kinds) check(cuptiActivityEnable(k), "cuptiActivityEnable");
#endif
}

std::vector<TraceRecord> KernelTrace::end() {
#ifdef PERFSIM_HAVE_CUPTI
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  for (CUpti_ActivityKind k : traced_kinds) check(cuptiActivityDisable(k), "cuptiActivityDisable");
#endif
  TraceState& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  return std::move(s.records);
}

}  // namespace perfsim::cuda
