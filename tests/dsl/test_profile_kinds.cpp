// Op kinds named in profile files: curve keys name a kind family (a paged or varlen kind's
// curves are its dense kind's, the layout in the variant), host dispatch takes any kind.
#include <doctest/doctest.h>

#include <string>

#include "calibration_test_util.hpp"
#include "core/errors.hpp"
#include "dsl/dsl.hpp"

using namespace perfsim;
using perfsim::test::temp_file;

namespace {

Hardware load(const std::string& file, const std::string& fields) {
  return load_profile(temp_file(file, "return profile {\n  name = \"kinds\", base = \"H100-SXM\",\n  " + fields + "\n}\n"));
}

}  // namespace

TEST_CASE("profile kinds: curve keys name the dense kind, a paged or varlen kind's key is refused") {
  const Hardware hw = load("perfsim_test_kinds_ok.lua",
                           "kernels = { [\"flash_attention/bf16/memory/paged\"] = { seconds = {1e-6}, efficiency = {0.5} } },");
  CHECK(hw.calibration.kernels.count("flash_attention/bf16/memory/paged") == 1);
  CHECK_THROWS_WITH_AS(
      (void)load("perfsim_test_kinds_bad.lua",
                 "kernels = { [\"paged_flash_attention/bf16/memory/paged\"] = { seconds = {1e-6}, efficiency = {0.5} } },"),
      doctest::Contains("key 'paged_flash_attention/bf16/memory/paged': paged_flash_attention ops are priced by the "
                        "curves of flash_attention"),
      ConfigError);
  CHECK_THROWS_WITH_AS(
      (void)load("perfsim_test_kinds_rope.lua",
                 "kernels = { [\"varlen_rope/bf16/memory\"] = { seconds = {1e-6}, efficiency = {0.5} } },"),
      doctest::Contains("varlen_rope ops are priced by the curves of rope"), ConfigError);
}

TEST_CASE("profile kinds: host dispatch names any kind; a paged kind not named takes its dense kind's") {
  const Hardware hw = load("perfsim_test_kinds_dispatch.lua",
                           "dispatch = { flash_attention = 9e-6, varlen_kv_append = 3e-6, kv_append = 5e-6 },");
  CHECK(hw.dispatch(OpKind::paged_flash_attention) == 9e-6);
  CHECK(hw.dispatch(OpKind::varlen_flash_attention) == 9e-6);
  CHECK(hw.dispatch(OpKind::varlen_kv_append) == 3e-6);
  CHECK(hw.dispatch(OpKind::paged_kv_append) == 5e-6);
  CHECK_THROWS_WITH_AS((void)load("perfsim_test_kinds_typo.lua", "dispatch = { paged_flash_atention = 9e-6 },"),
                       doctest::Contains("dispatch.paged_flash_atention is not an op kind"), ConfigError);
}
