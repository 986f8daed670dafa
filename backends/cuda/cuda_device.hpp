// What the runtime says about the GPUs: whether one is usable, and its properties.
#pragma once
#include "core/cost/hardware.hpp"
#include "core/run/backend.hpp"

namespace perfsim::cuda {

// True when the CUDA runtime loads and sees at least one device (never throws).
[[nodiscard]] bool gpu_present();
[[nodiscard]] int device_count();
// Properties read from the device: name, SMs, L2, memory, SM clock; catalog_name is the
// closest hardware catalog entry ("H100-SXM" for an H100 80GB HBM3), "" when none matches.
[[nodiscard]] DeviceInfo query_device(int ordinal);
// What core/cost/workspace.hpp needs to size this device's kernel workspaces: kind "gpu", the SM
// count and memory read from the device, name = catalog_name (or the device name). The
// backend sizes its workspaces with this profile; a prediction made with a catalog profile of
// the same SM count plans the same bytes.
[[nodiscard]] Hardware device_profile(int ordinal);

}  // namespace perfsim::cuda
