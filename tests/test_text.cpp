#include <doctest/doctest.h>

#include "core/dtype.hpp"
#include "core/text.hpp"

using namespace perfsim;

TEST_CASE("edit distance and suggestions") {
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(closest_match("h100-sxn", {"H100-SXM", "A100-80GB"}) == "H100-SXM");
  CHECK(closest_match("zzzzzz", {"H100-SXM", "A100-80GB"}).empty());
  CHECK(did_you_mean("lama-3-8b", {"llama-3-8b"}) == " (did you mean 'llama-3-8b'?)");
}

TEST_CASE("dtype sizes and names") {
  CHECK(bytes_of(DType::bf16) == 2);
  CHECK(bytes_of(DType::tf32) == 4);
  CHECK(bytes_of(DType::fp8) == 1);
  CHECK(parse_dtype("BF16") == DType::bf16);
  CHECK(parse_dtype("half") == DType::fp16);
  CHECK_FALSE(parse_dtype("fp64").has_value());
}
