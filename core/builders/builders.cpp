// Entry point of the graph builders: picks the builder for the model and the workload's phase.
// The builders themselves live in inference.cpp and train.cpp (transformers) and cnn.cpp.
#include "core/builders/builders.hpp"

#include <fmt/format.h>

#include "core/builders/cnn.hpp"
#include "core/errors.hpp"

namespace perfsim {

Graph build_graph(const ModelConfig& m, const Workload& w, const BuildOptions& o) {
  if (m.cnn) {
    // Data parallelism is applied to the built rank graph (core/parallel/data_parallel.hpp).
    const ParallelSpec& p = o.parallel;
    if (p.tp > 1 || p.pp > 1 || p.cp > 1 || p.ep > 1 || p.sp)
      throw ConfigError(fmt::format("model '{}': image models are laid out by data parallelism only (dp, zero); "
                                    "tp, pp, cp, ep and sp split transformer layers",
                                    m.name));
    return build_cnn(*m.cnn, w);
  }
  switch (w.phase) {
    case Phase::prefill: return build_prefill(m, w, o);
    case Phase::decode: return build_decode(m, w, o);
    case Phase::train: return build_train(m, w, o);
  }
  return build_decode(m, w, o);
}

}  // namespace perfsim
