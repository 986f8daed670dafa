// What the CPU backend takes from backends/common by its short names: the host storages and
// their conversions, the thread pool, and the initial values of persistent tensors.
#pragma once
#include "backends/common/parallel.hpp"
#include "backends/common/scalar.hpp"
#include "backends/common/tensor_init.hpp"

namespace perfsim::cpu {

using host::bf16;
using host::bytes_of;
using host::convert;
using host::data_name;
using host::fill_persistent;
using host::fp8_e4m3;
using host::from_f32;
using host::half;
using host::init_spec;
using host::InitKind;
using host::InitSpec;
using host::kv_scale_of;
using host::name_of;
using host::parallel_for;
using host::Storage;
using host::storage_of;
using host::thread_count;
using host::to_f32;

}  // namespace perfsim::cpu
