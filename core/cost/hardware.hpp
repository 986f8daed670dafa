// A hardware profile: datasheet peaks plus the efficiency tables the cost model applies.
#pragma once
#include <array>
#include <map>
#include <string>

#include "core/cost/calibration.hpp"
#include "core/graph/op_kind.hpp"
#include "core/config/dtype.hpp"

namespace perfsim {

// One interconnect: bandwidth per direction per device and per-message latency.
struct Link {
  double bandwidth = 0;  // bytes/s, unidirectional, per device
  double latency = 0;    // seconds per message (alpha)
};

struct Hardware {
  std::string name;            // catalog name, e.g. "H100-SXM"
  std::string kind = "gpu";    // "gpu" or "cpu"
  std::array<double, dtype_count> peak_flops{};  // dense FLOP/s indexed by DType; 0 = not supported
  double memory_bytes = 0;     // device memory capacity
  double memory_bandwidth = 0; // bytes/s (HBM or DRAM)
  double l2_bytes = 0;
  int sm_count = 0;            // SMs (GPU) or cores (CPU)
  // SMs a collective in flight holds: NCCL runs one CTA per channel, each on an SM of its own
  // that compute kernels cannot use meanwhile. 0 = collectives take nothing from compute.
  int collective_sms = 0;
  double launch_eager = 0;     // seconds of fixed device cost per op launched eagerly
  double launch_graph = 0;     // seconds per op when replayed from a captured graph
  // Seconds more an eager launch costs when the device sits idle waiting for it (the launch's
  // latency, hidden when the kernel queues behind running work); only host-paced eager steps
  // (models_dispatch) charge it.
  double launch_wait = 0;
  // Host seconds to issue one kernel eagerly (framework and driver work); an eager op starts
  // no sooner than the host has issued its kernels (kernel_launches, core/graph/op_metrics.hpp). 0 = the
  // host never holds the device back. dispatch_by_kind overrides it per op kind (calibrated);
  // dispatch_fixed_by_kind adds host seconds per op of kinds whose ops launch a varying
  // number of kernels (materialized attention: one cuBLAS call per sequence and head group).
  // A kind neither table names takes its calibration_family's entry (calibrate fits paged and
  // varlen ops with their dense kind's), then the default.
  double dispatch_eager = 0;
  std::map<OpKind, double> dispatch_by_kind;
  std::map<OpKind, double> dispatch_fixed_by_kind;
  double host_overhead = 0;    // seconds of host work per step (framework, sampling)
  // Host seconds an executed serving engine spends per op of each eagerly run engine step
  // before the step's kernels go (its graph built and checked, its runner made, its inputs
  // written): StepPricer adds it times the step's ops to every eager step. Fitted by
  // `perfsim calibrate` (the engine sweep); 0 = none.
  double engine_host_per_op = 0;
  // And host seconds per eagerly run engine step besides its per-op part and host_overhead
  // (planning the step, the runner's fixed set-up, the wait for the device): the engine
  // sweep's intercept. 0 = none.
  double engine_host_per_step = 0;
  Link nvlink, pcie, infiniband;  // pcie: the host link, which host<->device copies cross
  // GPUs one node joins over nvlink (or pcie); a collective over more GPUs crosses nodes and
  // runs over infiniband (roofline.cpp collective_time). 0 = unknown: every group is one node.
  int gpus_per_node = 0;
  // Bytes/s one host thread copies between buffers in host memory: the staging copy of a
  // transfer from pageable memory runs at this rate (0 = unknown).
  double host_copy_bandwidth = 0;
  // Fraction of peak reached per op class, for compute-bound and memory-bound work.
  // Datasheet defaults unless `calibrated` says otherwise.
  std::map<OpClass, double> compute_efficiency;
  std::map<OpClass, double> memory_efficiency;
  // Tables fitted by `perfsim calibrate`; where they hold an op's kernel they replace the
  // per-class efficiencies for it (roofline.cpp).
  Calibration calibration;
  bool calibrated = false;
  std::string base;            // calibrated profiles: the catalog entry they refine ("H100-SXM")
  std::string source;          // where the figures come from (datasheet URL, calibration file)
  double price_per_hour = 0;   // USD per GPU-hour (0 = unknown), with the source in stdlib/hardware.lua
  // How much faster than the dense peak GEMMs on 2:4 sparse weights run (sparse_24): 2 on the
  // sparse tensor cores of Ampere and later datasheets; 1 = none (priced dense).
  double sparse_speedup = 1;

  [[nodiscard]] double peak(DType t) const { return peak_flops[static_cast<int>(t)]; }
  [[nodiscard]] bool supports(DType t) const { return peak(t) > 0; }
  [[nodiscard]] double dispatch(OpKind k) const { return by_kind(dispatch_by_kind, k, dispatch_eager); }
  [[nodiscard]] double dispatch_fixed(OpKind k) const { return by_kind(dispatch_fixed_by_kind, k, 0.0); }
  [[nodiscard]] bool models_dispatch() const { return dispatch_eager > 0 || !dispatch_by_kind.empty(); }
  [[nodiscard]] double compute_eff(OpClass c) const;
  [[nodiscard]] double memory_eff(OpClass c) const;
  // The fraction of the SMs a collective in flight takes from compute (timeline_makespan).
  [[nodiscard]] double collective_sm_share() const {
    return sm_count > 0 ? static_cast<double>(collective_sms) / sm_count : 0.0;
  }
  // Arithmetic intensity (FLOP/byte) where compute and memory time are equal.
  [[nodiscard]] double ridge_point(DType t) const { return peak(t) / memory_bandwidth; }

 private:
  static double by_kind(const std::map<OpKind, double>& table, OpKind k, double otherwise) {
    auto it = table.find(k);
    if (it == table.end()) it = table.find(calibration_family(k));
    return it == table.end() ? otherwise : it->second;
  }
};

// Throws ConfigError naming `where` (the profile or its file) and the field when a number is
// NaN or infinite, negative, or zero where it must be positive (memory_bandwidth, efficiencies,
// calibration tables).
void validate_numbers(const Hardware& hw, const std::string& where);

}  // namespace perfsim
