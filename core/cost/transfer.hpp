// A calibrated profile carried to hardware it was not measured on (Habitat's idea, Yu et al.
// 2021, "Habitat: A Runtime-Based Computational Performance Predictor for Deep Neural Network
// Training", USENIX ATC): the kernels' measured efficiencies, as fractions of the datasheet
// peaks of the device they were timed on, applied to the target's datasheet peaks. A
// compute-bound kernel then scales with the peak FLOP/s, a memory-bound one with the HBM
// bandwidth, and the host-side figures (launch, dispatch, engine host work) are kept, since the
// host and the software do not change with the GPU.
#pragma once
#include "core/cost/hardware.hpp"

namespace perfsim {

// `from`'s calibration and efficiencies with `to`'s datasheet figures: name "FROM@TO", base
// `to`'s catalog name, its source saying where both came from. Throws ConfigError when `from`
// carries no calibration or the two are of different kinds (a CPU profile on a GPU).
[[nodiscard]] Hardware transfer_profile(const Hardware& from, const Hardware& to);

}  // namespace perfsim
