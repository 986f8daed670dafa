// Calibrated profiles as Lua: written and loaded back unchanged, base entries, and bad files
// that say what to fix.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "calibration_test_util.hpp"
#include "core/cost/calibration.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/roofline.hpp"
#include "core/errors.hpp"
#include "dsl/dsl.hpp"

using namespace perfsim;
using perfsim::test::approx;
using perfsim::test::corner_table;
using perfsim::test::temp_file;

TEST_CASE("profiles: written as Lua and loaded back unchanged") {
  Hardware hw = find_hardware("H100-SXM");
  hw.name = "test-local";
  hw.base = "H100-SXM";
  hw.calibrated = true;
  hw.launch_eager = 7.5e-6;
  hw.launch_graph = 1.25e-6;
  hw.launch_wait = 2.5e-6;
  hw.pcie = {52e9, 9e-6};
  hw.dispatch_eager = 8e-6;
  hw.dispatch_by_kind[OpKind::gemm] = 14.5e-6;
  hw.dispatch_fixed_by_kind[OpKind::attn_scores] = 21e-6;
  hw.calibration.gemm[DType::bf16] = corner_table();
  hw.calibration.kernels["rmsnorm/bf16/memory"] = EfficiencyCurve{{1e-7, 1e-5}, {0.05, 0.85}};
  hw.calibration.collectives[{Collective::all_gather, 4}] = CollectiveFit{12e-6, 150e9};
  CollectiveFit measured;
  measured.payload = {8192, 1073741824};
  measured.seconds = {9.5e-6, 3.25e-3};
  hw.calibration.collectives[{Collective::all_reduce, 2}] = measured;
  hw.calibration.measured_on = {"cuda", "Test GPU", "580.1", "CUDA 13.0", "2026-11-22", "quick", "CUPTI records"};
  const std::string text = profile_to_lua(hw);
  CHECK(text.find("mode = \"quick\", op_timing = \"CUPTI records\"}") != std::string::npos);
  CHECK(text.find("return profile {") != std::string::npos);
  CHECK(text.find("[\"rmsnorm/bf16/memory\"]") != std::string::npos);

  const Hardware back = load_profile(temp_file("perfsim_test_profile.lua", text));
  CHECK(back.name == "test-local");
  CHECK(back.base == "H100-SXM");
  CHECK(back.calibrated);
  CHECK(back.launch_eager == approx(7.5e-6));
  CHECK(back.launch_wait == approx(2.5e-6));
  CHECK(back.pcie.bandwidth == approx(52e9));
  CHECK(back.dispatch_eager == approx(8e-6));
  CHECK(back.dispatch(OpKind::gemm) == approx(14.5e-6));
  CHECK(back.dispatch_fixed(OpKind::attn_scores) == approx(21e-6));
  CHECK(back.dispatch_fixed(OpKind::gemm) == 0.0);
  CHECK(back.dispatch(OpKind::rmsnorm) == approx(8e-6));
  CHECK(back.peak(DType::bf16) == approx(hw.peak(DType::bf16)));
  REQUIRE(back.calibration.gemm.count(DType::bf16) == 1);
  CHECK(back.calibration.gemm.at(DType::bf16).at(2, 200, 200) == approx(0.3375));
  REQUIRE(back.calibration.kernels.count("rmsnorm/bf16/memory") == 1);
  CHECK(back.calibration.kernels.at("rmsnorm/bf16/memory").at(1e-6) ==
        approx(std::sqrt(0.05 * 0.85)));
  const auto fit = back.calibration.collectives.find({Collective::all_gather, 4});
  REQUIRE(fit != back.calibration.collectives.end());
  CHECK(fit->second.bandwidth == approx(150e9));
  const auto points = back.calibration.collectives.find({Collective::all_reduce, 2});
  REQUIRE(points != back.calibration.collectives.end());
  // Byte counts come back whole, not rounded to 6 digits.
  CHECK(points->second.payload == std::vector<double>{8192, 1073741824});
  CHECK(points->second.seconds[1] == approx(3.25e-3));
  CHECK(back.gpus_per_node == 8);  // the H100-SXM entry's, written into the profile
  CHECK(back.calibration.measured_on.device == "Test GPU");
  CHECK(back.calibration.measured_on.mode == "quick");
  CHECK(back.calibration.measured_on.op_timing == "CUPTI records");
  // A profile whose calibration did not say how it timed (CPU, older files) writes no field.
  hw.calibration.measured_on.op_timing.clear();
  CHECK(profile_to_lua(hw).find("op_timing") == std::string::npos);
}

TEST_CASE("profiles: gpus_per_node comes from the base entry unless the profile gives it") {
  const std::string old = temp_file("perfsim_test_old_nodes.lua", R"(return profile {
  name = "old", base = "H100-SXM", calibrated = true,
})");
  CHECK(load_profile(old).gpus_per_node == 8);
  const std::string given = temp_file("perfsim_test_given_nodes.lua", R"(return profile {
  name = "four", base = "H100-SXM", gpus_per_node = 4,
})");
  CHECK(load_profile(given).gpus_per_node == 4);
  const std::string unknown = temp_file("perfsim_test_pcie_nodes.lua", R"(return profile {
  name = "pcie", base = "H100-PCIe",
})");
  CHECK(load_profile(unknown).gpus_per_node == 0);
  const std::string negative = temp_file("perfsim_test_negative_nodes.lua", R"(return profile {
  name = "bad", base = "H100-SXM", gpus_per_node = -1,
})");
  CHECK_THROWS_WITH_AS((void)load_profile(negative), doctest::Contains("gpus_per_node must be >= 0"), ConfigError);
}

TEST_CASE("profiles: bad files and names are errors that say what to fix") {
  const std::string ragged = temp_file("perfsim_test_ragged.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  gemm = { bf16 = { m = {1, 2}, n = {8}, k = {8}, efficiency = { {{0.5}} } } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(ragged),
                       doctest::Contains("efficiency must hold one entry per m (2)"), ConfigError);
  const std::string negative = temp_file("perfsim_test_negative.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  kernels = { ["rmsnorm/bf16/memory"] = { seconds = {1e-6, 1e-5}, efficiency = {0.5, -1} } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(negative), doctest::Contains("efficiency[2] must be > 0"),
                       ConfigError);
  const std::string bad_key = temp_file("perfsim_test_key.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  kernels = { rmsnorm = { seconds = {1e-6}, efficiency = {0.5} } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(bad_key), doctest::Contains("kind/dtype/bound"), ConfigError);
  const std::string bad_variant = temp_file("perfsim_test_variant.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  kernels = { ["rmsnorm/bf16/memory/wide"] = { seconds = {1e-6}, efficiency = {0.5} } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(bad_variant), doctest::Contains("decode, unaligned[_<layout>_<operands>] or fused"), ConfigError);
  const std::string bad_layout = temp_file("perfsim_test_layout.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  kernels = { ["gemm/bf16/compute/unaligned_nx_c"] = { seconds = {1e-6}, efficiency = {0.5} } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(bad_layout), doctest::Contains("unaligned_nx_c"), ConfigError);
  const std::string bad_fixed = temp_file("perfsim_test_fixed.lua", R"(return profile {
  name = "bad", base = "H100-SXM", dispatch_fixed = { attn_scores = -1e-6 },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(bad_fixed), doctest::Contains("dispatch_fixed.attn_scores must be seconds >= 0"),
                       ConfigError);
  // The message names the file: the profile's fields have no line of their own.
  CHECK_THROWS_WITH_AS((void)load_profile(bad_fixed), doctest::Contains((bad_fixed + ": ").c_str()), ConfigError);
  const std::string both = temp_file("perfsim_test_coll_both.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  collectives = { all_reduce = { [2] = { bytes = {8192, 65536}, seconds = {9e-6, 10e-6}, latency = 1e-6 } } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(both), doctest::Contains("collectives.all_reduce[2]: give either bytes and seconds"),
                       ConfigError);
  const std::string falling = temp_file("perfsim_test_coll_falling.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  collectives = { all_gather = { [4] = { bytes = {8192, 65536}, seconds = {9e-6, 8e-6} } } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(falling), doctest::Contains("seconds must not decrease with bytes"),
                       ConfigError);
  const std::string misspelled = temp_file("perfsim_test_coll_name.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  collectives = { all_gahter = { [2] = { bytes = {8192, 65536}, seconds = {9e-6, 10e-6} } } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(misspelled), doctest::Contains("collective 'all_gahter' is not one of"),
                       ConfigError);
  CHECK_THROWS_WITH_AS((void)load_profile(misspelled), doctest::Contains("(did you mean 'all_gather'?)"), ConfigError);
  const std::string one_point = temp_file("perfsim_test_coll_one.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  collectives = { all_gather = { [4] = { bytes = {8192}, seconds = {9e-6} } } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(one_point), doctest::Contains("needs 2 or more bytes with a time each"),
                       ConfigError);
  const std::string no_base = temp_file("perfsim_test_nobase.lua", "return profile { name = 'x' }");
  CHECK_THROWS_WITH_AS((void)load_profile(no_base), doctest::Contains("missing field 'base'"), ConfigError);
  CHECK_THROWS_WITH_AS((void)load_profile("no-such-profile"),
                       doctest::Contains("unknown profile 'no-such-profile'"), ConfigError);
  CHECK_THROWS_WITH_AS((void)load_profile("/nonexistent/p.lua"), doctest::Contains("not found"),
                       ConfigError);
}
