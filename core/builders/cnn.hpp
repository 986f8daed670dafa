// The graph builder of a convolutional image classifier (core/config/cnn.hpp): one training
// step (forward, backward, AdamW) or one inference batch (forward with running batch-norm
// statistics, logits out), fp32 NHWC, for one GPU.
#pragma once
#include "core/config/cnn.hpp"
#include "core/config/workload.hpp"
#include "core/graph/graph.hpp"

namespace perfsim {

// w.phase train: the step over w.batch images (labels in, the mean cross-entropy's gradient
// through every layer, then AdamW over every parameter); prefill: inference over w.batch
// images. The blocks after a stage's first are alike: the graph builds one of them with op and
// tensor counts of blocks − 1 (Op::count), as transformer layers are sampled. Throws
// ConfigError for a decode workload (an image model has no tokens to generate) or gradient
// accumulation (not supported yet).
[[nodiscard]] Graph build_cnn(const CnnConfig& m, const Workload& w);

}  // namespace perfsim
