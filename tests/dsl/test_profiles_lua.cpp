// Calibrated profiles as Lua: written and loaded back unchanged, base entries, and bad files
// that say what to fix.
#include <doctest/doctest.h>

#include <filesystem>

#include "approx.hpp"
#include "calibration_test_util.hpp"
#include "core/cost/calibration.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/roofline.hpp"
#include "core/errors.hpp"
#include "core/kernel_fingerprint.hpp"
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
  CHECK_THROWS_WITH_AS((void)load_profile(bad_variant), doctest::Contains("variant: decode, paged, fused, contiguous, unaligned[_<layout>_<operands>]"), ConfigError);
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

TEST_CASE("profiles: the kernel fingerprint is written, loaded back and compared with this build's") {
  // The build's fingerprints: 12 hex digits per backend, none for other names.
  for (const char* b : {"cpu", "cuda"}) {
    const std::string_view f = kernel_fingerprint(b);
    CAPTURE(b);
    REQUIRE(f.size() == 12);
    CHECK(f.find_first_not_of("0123456789abcdef") == std::string_view::npos);
  }
  CHECK(kernel_fingerprint("cpu") != kernel_fingerprint("cuda"));
  CHECK(kernel_fingerprint("tpu").empty());

  Hardware hw = find_hardware("H100-SXM");
  hw.name = "fingerprinted";
  hw.base = "H100-SXM";
  hw.calibrated = true;
  hw.calibration.kernels["rmsnorm/bf16/memory"] = EfficiencyCurve{{1e-7, 1e-5}, {0.05, 0.85}};
  hw.calibration.measured_on = {"cuda", "Test GPU", "580.1", "CUDA 13.0", "2026-11-22", "full", "", "0123456789ab"};
  const std::string text = profile_to_lua(hw);
  CHECK(text.find("mode = \"full\", kernels = \"0123456789ab\"}") != std::string::npos);
  const Hardware back = load_profile(temp_file("perfsim_test_fingerprint.lua", text));
  CHECK(back.calibration.measured_on.kernels == "0123456789ab");

  // Other kernels than today's: the report's profile line says so, naming both.
  const std::string stale = kernels_freshness(back.calibration.measured_on);
  CHECK(stale.find("its cuda kernels (0123456789ab) are not this build's (" + std::string(kernel_fingerprint("cuda")) +
                   "): recalibrate") == 0);
  Graph g;
  Tensor x;
  x.name = "x", x.shape = {64, 64}, x.dtype = DType::bf16, x.role = TensorRole::input;
  const int in = g.add_tensor(x);
  x.name = "y", x.role = TensorRole::activation;
  const int out = g.add_tensor(x);
  Op op;
  op.name = "norm", op.kind = OpKind::rmsnorm, op.dtype = DType::bf16, op.inputs = {in, in}, op.outputs = {out};
  op.attrs.rows = 64, op.attrs.cols = 64;
  g.add_op(op);
  CHECK(predict(g, back).profile.find(stale) != std::string::npos);
  // Today's kernels, or a profile that records none: nothing to say.
  Provenance today = back.calibration.measured_on;
  today.kernels = std::string(kernel_fingerprint("cuda"));
  CHECK(kernels_freshness(today).empty());
  today.kernels.clear();
  CHECK(kernels_freshness(today).empty());
  hw.calibration.measured_on.kernels.clear();
  CHECK(profile_to_lua(hw).find("kernels = \"") == std::string::npos);
}

TEST_CASE("profiles: every shipped profile loads") {
  namespace fs = std::filesystem;
  int loaded = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(PERFSIM_SOURCE_DIR) / "stdlib" / "profiles")) {
    if (e.path().extension() != ".lua") continue;
    CAPTURE(e.path().string());
    Hardware hw;
    REQUIRE_NOTHROW(hw = load_profile(e.path().string()));
    CHECK(hw.calibrated);
    ++loaded;
  }
  CHECK(loaded >= 2);
}
