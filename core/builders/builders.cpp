// Entry point of the graph builders: picks the builder for the workload's phase.
// The builders themselves live in inference.cpp and train.cpp.
#include "core/builders/builders.hpp"

namespace perfsim {

Graph build_graph(const ModelConfig& m, const Workload& w, const BuildOptions& o) {
  switch (w.phase) {
    case Phase::prefill: return build_prefill(m, w, o);
    case Phase::decode: return build_decode(m, w, o);
    case Phase::train: return build_train(m, w, o);
  }
  return build_decode(m, w, o);
}

}  // namespace perfsim
