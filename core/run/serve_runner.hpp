// A serving scenario through run_scenario: the same requests through every stack step's engine,
// predicted for the device (or first hardware) and for the other hardware as what-ifs.
#pragma once
#include "core/run/runner.hpp"

namespace perfsim {

[[nodiscard]] RunResult run_serving(const Scenario& s, Backend* backend, const Hardware* device_hw,
                                    const RunnerHooks& hooks);

// "2,000 requests, poisson 20/s, prompt lognormal mean 512 (max 4,096), output ..."
[[nodiscard]] std::string describe(const ServeSpec& s);

}  // namespace perfsim
