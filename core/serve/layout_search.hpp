// Serving layout search: the services a serve{} scenario could run on N GPUs (engines of tp ×
// pp GPUs, as N / (tp · pp) replicas behind the router or split into prefill and decode
// engines), each with a few scheduler settings, predicted on the same requests
// (predict_serving), the ones that cannot run pruned with a reason, the rest ranked by goodput
// per GPU and each given the one thing that holds it back (its limiter). docs/SERVING.md
// (Layout search) states the space and the rules.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config/model.hpp"
#include "core/config/parallel.hpp"
#include "core/config/serve.hpp"
#include "core/cost/hardware.hpp"
#include "core/passes/passes.hpp"
#include "core/serve/metrics.hpp"
#include "core/serve/traffic.hpp"

namespace perfsim {

// The candidates of each dimension; an empty list takes the default beside it.
struct ServeSearchSpace {
  int gpus = 0;                      // GPUs of every service
  std::vector<int> tp;               // default: powers of two up to the node (gpus_per_node, 8 when 0)
  std::vector<int> pp;               // default: 1, 2, 4 up to the layers
  std::vector<int64_t> max_batch;    // default 64, 128, 256 (continuous scheduler only)
  std::vector<int64_t> chunk;        // chunked_prefill tokens, default 512, 2048 (continuous only)
  // Shares of the engines that prefill in a disaggregated split (rounded, at least one of each).
  std::vector<double> prefill_shares = {0.25, 0.5, 0.75};
  double attainment = 0.99;          // share of requests that must meet the SLO (capacity.hpp)
  int threads = 0;                   // worker threads; 0: the machine's cores
  // Told how many candidates are done (one call at a time), for a progress line.
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// What holds a service back, the first that applies (docs/SERVING.md, Layout search):
//   kv_memory  requests were rejected or preempted, or the KV pool was at least 98% full;
//   none       else, when it meets the SLO (ServeMetrics::slo_attainment >= the target);
//   queue      else, when requests wait longer than the TTFT SLO (1 s without one) at p99 before
//              their first step: fewer are served than arrive and the backlog grows;
//   ttft, tpot, e2e  else, the bound whose p99 exceeds it by the largest factor.
enum class ServeLimiter { none, kv_memory, queue, ttft, tpot, e2e };
[[nodiscard]] const char* name_of(ServeLimiter l);   // "none", "kv_memory", ... (JSON)
[[nodiscard]] const char* describe(ServeLimiter l);  // "none (meets SLO)", "KV memory", ...
inline constexpr double kv_full_share = 0.98;
[[nodiscard]] ServeLimiter serve_limiter(const ServeMetrics& m, const Slo& slo, double attainment);

struct ServeCandidate {
  ParallelSpec layout;               // dp: replicas behind the router (1 when disaggregated); tp, pp
  int prefill_engines = 0, decode_engines = 0;  // both 0: not disaggregated
  int64_t max_batch = 0;             // the scheduler's, as set for this candidate
  int64_t chunk = 0;                 // chunked_prefill tokens (0: off)
  bool priced = false;               // false: pruned, `pruned` says why
  std::string pruned;
  ServeMetrics metrics;
  double goodput_per_gpu = 0;        // requests/s meeting the SLO, per GPU
  double output_per_gpu = 0;         // output tokens/s per GPU
  double cost_per_million = 0;       // USD per million output tokens (0: no price)
  ServeLimiter limiter = ServeLimiter::none;

  [[nodiscard]] bool disaggregated() const { return prefill_engines > 0 && decode_engines > 0; }
  [[nodiscard]] int engines() const { return disaggregated() ? prefill_engines + decode_engines : layout.dp; }
};

// "TP8", "4 × TP2", "1P3D × TP4", "2 × TP4 × PP2", "8 × 1 GPU".
[[nodiscard]] std::string layout_words(const ServeCandidate& c);

struct ServeSearchResult {
  std::string model, hardware;
  int gpus = 0;
  double price_per_hour = 0;          // the hardware's, USD per GPU-hour (0 = unknown)
  Slo slo;
  double attainment = 0.99;
  bool continuous = true;             // the stack's scheduler batches continuously (knobs searched)
  bool open_loop = true;              // disaggregated splits tried
  int64_t requests = 0;               // drawn once, served by every candidate
  // Priced candidates first, by goodput per GPU then output tokens/s per GPU (higher first),
  // ties in enumeration order; then the pruned ones in enumeration order.
  std::vector<ServeCandidate> candidates;
  int64_t priced = 0, meeting = 0;    // priced; of them, meeting the SLO
  int64_t engines_skipped = 0;        // tp · pp not dividing the GPUs
};

// Searches the services of `space.gpus` GPUs for the last step of `stack` serving `requests`
// (drawn once from `spec` by the caller). Throws ConfigError naming the field when the space
// is unusable (gpus < 1, a degree < 1).
[[nodiscard]] ServeSearchResult search_serving_layouts(const ModelConfig& m, const Hardware& hw,
                                                       const ServeSpec& spec, const std::vector<Request>& requests,
                                                       const std::vector<StackStep>& stack,
                                                       const ServeSearchSpace& space);

}  // namespace perfsim
