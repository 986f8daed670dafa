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
  std::vector<uint32_t> correlation;                    // by record: the API call that launched it
  std::unordered_map<uint32_t, uint64_t> tag_of;        // API call -> tag pushed around it
  std::string why;
};

TraceState& state() {
  static TraceState s;
  return s;
}

constexpr const char* timing_choice = "PERFSIM_OP_TIMING";

// "" (unset), "cupti", "cupti-graphs" or "events"; anything else is refused once, by name.
std::string timing_mode() {
  static const std::string mode = [] {
    const char* v = std::getenv(timing_choice);
    const std::string m = v != nullptr ? v : "";
    if (m.empty() || m == "cupti" || m == "cupti-graphs" || m == "events") return m;
    throw std::runtime_error(fmt::format("{}={} is not a timing method: use cupti, cupti-graphs or events",
                                         timing_choice, m));
  }();
  return mode;
}

#ifdef PERFSIM_HAVE_CUPTI
constexpr std::size_t buffer_bytes = std::size_t{8} << 20;
// CUPTI writes the records that pair a tag with the API calls under it only while the API
// calls themselves are recorded: runtime and driver (cuBLASLt launches through the driver).
constexpr CUpti_ActivityKind traced_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
constexpr CUpti_ExternalCorrelationKind tag_kind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

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
    auto keep = [&](uint64_t start, uint64_t end, uint64_t node, uint32_t correlation) {
      s.records.push_back({start, end, node != 0 ? captured_node(s, node) : 0, 0});
      s.correlation.push_back(correlation);
    };
    while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
      if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
        keep(k->start, k->end, k->graphNodeId, k->correlationId);
      } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
        keep(c->start, c->end, c->graphNodeId, c->correlationId);
      } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
        keep(m->start, m->end, m->graphNodeId, m->correlationId);
      } else if (r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(r);
        if (e->externalKind == tag_kind) s.tag_of[e->correlationId] = e->externalId;
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

KernelTrace* KernelTrace::get() {
  static KernelTrace* const instance = []() -> KernelTrace* {
    if (timing_mode() == "events") {
      state().why = fmt::format("{}=events", timing_choice);
      return nullptr;
    }
#ifdef PERFSIM_HAVE_CUPTI
    static KernelTrace trace;
    return subscribe(&trace);
#else
    state().why = "built without CUPTI";
    return nullptr;
#endif
  }();
  return instance;
}

const std::string& KernelTrace::why() { return state().why; }

bool KernelTrace::times_eager() { return get() != nullptr && timing_mode() != "cupti-graphs"; }

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
    s.correlation.clear();
    s.tag_of.clear();
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
  for (std::size_t i = 0; i < s.records.size(); ++i)
    if (const auto it = s.tag_of.find(s.correlation[i]); it != s.tag_of.end()) s.records[i].tag = it->second;
  return std::move(s.records);
}

void KernelTrace::push_tag(uint64_t tag) {
#ifdef PERFSIM_HAVE_CUPTI
  check(cuptiActivityPushExternalCorrelationId(tag_kind, tag), "cuptiActivityPushExternalCorrelationId");
#else
  (void)tag;
#endif
}

void KernelTrace::pop_tag() {
#ifdef PERFSIM_HAVE_CUPTI
  uint64_t last = 0;
  (void)cuptiActivityPopExternalCorrelationId(tag_kind, &last);  // a destructor's: never throws
#endif
}

}  // namespace perfsim::cuda
