#include <doctest/doctest.h>

#include "core/config/dtype.hpp"
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

TEST_CASE("CSV lines split back into the fields csv_quote wrote") {
  const std::string line = csv_quote("plain") + "," + csv_quote("a, b") + "," + csv_quote("say \"hi\"") + ",,x";
  const auto fields = split_csv_line(line);
  REQUIRE(fields);
  REQUIRE(fields->size() == 5);
  CHECK((*fields)[0] == "plain");
  CHECK((*fields)[1] == "a, b");
  CHECK((*fields)[2] == "say \"hi\"");
  CHECK((*fields)[3].empty());
  CHECK((*fields)[4] == "x");
  CHECK(split_csv_line("")->size() == 1);
  CHECK_FALSE(split_csv_line("a,\"open"));
}

TEST_CASE("a file's text, or nothing when it cannot be read") {
  CHECK_FALSE(read_text_file("/nonexistent/perfsim/file.txt"));
  const auto self = read_text_file("/proc/self/status");
  REQUIRE(self);
  CHECK(self->find("Name:") != std::string::npos);
}
