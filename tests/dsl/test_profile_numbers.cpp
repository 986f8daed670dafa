// Profile files whose numbers are NaN, infinite, or negative where they must be positive are
// refused with one line naming the file and the field.
#include <doctest/doctest.h>

#include <string>

#include "calibration_test_util.hpp"
#include "core/errors.hpp"
#include "dsl/dsl.hpp"

using namespace perfsim;
using perfsim::test::temp_file;

namespace {

// A profile file refining H100-SXM with `fields`; returns load_profile's message ("" if none).
std::string load_error(const std::string& file, const std::string& fields) {
  const std::string path =
      temp_file(file, "return profile {\n  name = \"bad\", base = \"H100-SXM\",\n  " + fields + "\n}\n");
  try {
    (void)load_profile(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("profile numbers: NaN and inf fields are refused naming the field and the file") {
  struct Case {
    const char* fields;
    const char* field;
  };
  const Case cases[] = {
      {"memory_bandwidth = 0/0", "memory_bandwidth must be a finite number > 0 (got nan)"},
      {"memory_bandwidth = 1/0", "memory_bandwidth must be a finite number > 0 (got inf)"},
      {"memory_bytes = 0/0", "memory_bytes must be a finite number >= 0 (got nan)"},
      {"l2_bytes = math.huge", "l2_bytes must be a finite number >= 0 (got inf)"},
      {"peak_flops = {bf16 = 0/0}", "peak_flops.bf16"},
      {"peak_flops = {fp32 = 1/0}", "peak_flops.fp32"},
      {"launch_eager = 0/0", "launch_eager"},
      {"launch_graph = -1e-6", "launch_graph must be a finite number >= 0 (got -1e-06)"},
      {"host_overhead = 1/0", "host_overhead"},
      {"host_copy_bandwidth = 0/0", "host_copy_bandwidth"},
      {"nvlink = {bandwidth = 1/0, latency = 1e-6}", "nvlink.bandwidth"},
      {"pcie = {bandwidth = 1e9, latency = 0/0}", "pcie.latency"},
      {"compute_efficiency = {gemm = 0/0}", "compute_efficiency"},
      {"memory_efficiency = {pointwise = 1/0}", "memory_efficiency"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string file = "perfsim_test_numbers_" + std::to_string(i++) + ".lua";
    const std::string msg = load_error(file, c.fields);
    CAPTURE(msg);
    CHECK(msg.find(c.field) != std::string::npos);
    CHECK(msg.find(file) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("profile numbers: calibration tables with NaN or inf are refused") {
  CHECK(load_error("perfsim_test_numbers_kernel.lua",
                   "kernels = { [\"rmsnorm/bf16/memory\"] = { seconds = {1e-6, 1/0}, efficiency = {0.5, 0.6} } },")
            .find("seconds[2]") != std::string::npos);
  CHECK(load_error("perfsim_test_numbers_kernel_eff.lua",
                   "kernels = { [\"rmsnorm/bf16/memory\"] = { seconds = {1e-6, 1e-5}, efficiency = {0.5, 0/0} } },")
            .find("efficiency[2]") != std::string::npos);
  CHECK(load_error("perfsim_test_numbers_gemm.lua",
                   "gemm = { bf16 = { m = {1, 2}, n = {8}, k = {8}, efficiency = { {{0.5}}, {{1/0}} } } },")
            .find("gemm.bf16.efficiency[2]") != std::string::npos);
}

TEST_CASE("profile numbers: finite figures still load") {
  CHECK(load_error("perfsim_test_numbers_ok.lua",
                   "memory_bandwidth = 3e12, launch_graph = 0, nvlink = {bandwidth = 4.5e11, latency = 2e-6},") == "");
}
