// A GPU file that reaches into the CPU backend: backends share backends/ops and
// backends/common, never each other.
#pragma once
#include "backends/cpu/cpu_kernels.hpp"
