// A real `calibrate --quick` on the CPU backend, written as a profile, read back with
// load_profile(), and used to price a graph: the calibrated tables must price its ops.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "approx.hpp"
#include "backends/cpu/cpu_backend.hpp"
#include "core/builders/builders.hpp"
#include "core/calibrate/calibrate.hpp"
#include "core/cost/cost_model.hpp"
#include "dsl/dsl.hpp"

using namespace perfsim;
using perfsim::test::approx;

TEST_CASE("calibrate cpu --quick: the written profile loads back and prices with its tables") {
  cpu::CpuBackend backend;
  const Hardware base = find_hardware(backend.device().catalog_name);
  CalibrateOptions o;
  o.quick = true;
  o.name = "test-cpu-local";
  const CalibrateResult r = calibrate(backend, base, o);
  CHECK(r.hw.calibrated);
  CHECK(r.hw.calibration.measured_on.backend == "cpu");
  CHECK(r.hw.calibration.measured_on.mode == "quick");
  CHECK(r.hw.calibration.gemm.count(DType::fp32) == 1);
  CHECK(r.hw.calibration.kernels.count("rmsnorm/fp32/memory") == 1);
  CHECK(r.hw.launch_eager == r.hw.launch_graph);  // no graph mode on a CPU
  // The engine sweep ran the executed engine's steps: host work per op, a few µs or less.
  CHECK(r.hw.engine_host_per_op > 0);
  CHECK(r.hw.engine_host_per_op < 1e-3);
  CHECK(r.hw.engine_host_per_step >= 0);
  CHECK(r.hw.engine_host_per_step < 1);

  // The recorded points: GEMM grid cells and the calibration models' ops, each efficiency
  // being its roofline time over its kernel time, the kernel time at most the measured one.
  int grid = 0, kernels = 0;
  for (const MeasuredPoint& pt : r.points) {
    CHECK(pt.efficiency == approx(pt.curve.roofline_seconds / pt.kernel_seconds));
    CHECK(pt.kernel_seconds <= pt.measured_seconds);
    if (pt.source == "gemm fp32 grid") ++grid;
    if (pt.curve.key == "rmsnorm/fp32/memory") ++kernels;
  }
  CHECK(grid > 0);
  CHECK(kernels > 0);

  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("perfsim_cal_test_" + std::to_string(::getpid()) + ".lua");
  {
    std::ofstream out(file);
    out << profile_to_lua(r.hw);
  }
  const Hardware hw = load_profile(file.string());
  std::filesystem::remove(file);
  CHECK(hw.calibrated);
  CHECK(hw.engine_host_per_op == approx(r.hw.engine_host_per_op));
  CHECK(hw.engine_host_per_step == approx(r.hw.engine_host_per_step));
  CHECK(hw.name == "test-cpu-local");
  CHECK(hw.base == base.name);
  REQUIRE(hw.calibration.gemm.count(DType::fp32) == 1);
  // The Lua text keeps six significant digits.
  const std::vector<double>& back = hw.calibration.gemm.at(DType::fp32).efficiency;
  const std::vector<double>& fitted = r.hw.calibration.gemm.at(DType::fp32).efficiency;
  REQUIRE(back.size() == fitted.size());
  for (std::size_t i = 0; i < back.size(); ++i) CHECK(back[i] == approx(fitted[i]).epsilon(1e-5));

  // A small decode graph priced on the loaded profile: GEMMs from the table, norms from a curve.
  ModelConfig m;
  m.name = "tiny";
  m.layers = 2;
  m.hidden = 128;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = 256;
  m.vocab = 500;
  m.max_seq = 512;
  m.activation = Activation::swiglu;
  m.norm = NormKind::rmsnorm;
  m.rope = true;
  Workload w;
  w.prompt = 100;
  const Graph g = build_graph(m, w);
  const Prediction p = predict(g, hw);
  CHECK(p.calibrated);
  int gemms = 0, norms = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    if (g.ops[i].kind == OpKind::gemm && p.ops[i].calibrated) ++gemms;
    if (g.ops[i].kind == OpKind::rmsnorm && p.ops[i].calibrated) ++norms;
  }
  CHECK(gemms > 0);
  CHECK(norms > 0);
}
