// Report files are written whole or not at all (cli/output_file.hpp).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "cli/output_file.hpp"
#include "core/errors.hpp"

using namespace perfsim;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace

TEST_CASE("cli output file: written whole through a tmp file") {
  char dir_template[] = "/tmp/perfsim_out_XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  REQUIRE(dir != nullptr);
  const std::string path = std::string(dir) + "/report.json";

  write_file_atomically(path, "{\"a\": 1}\n");
  CHECK(read_all(path) == "{\"a\": 1}\n");
  CHECK_FALSE(exists(path + ".tmp"));

  // A second write replaces the file entirely.
  write_file_atomically(path, "x");
  CHECK(read_all(path) == "x");

  // A missing directory: nothing is written, the error names the directory.
  const std::string missing = std::string(dir) + "/no/such/report.csv";
  CHECK_THROWS_AS(check_writable(missing), ConfigError);
  CHECK_THROWS_WITH_AS(write_file_atomically(missing, "y"), doctest::Contains("cannot write"),
                       ConfigError);
  CHECK_FALSE(exists(missing));
  CHECK_FALSE(exists(missing + ".tmp"));

  // The target is a directory: the rename fails and the tmp file is removed.
  const std::string subdir = std::string(dir) + "/sub";
  REQUIRE(::mkdir(subdir.c_str(), 0755) == 0);
  CHECK_THROWS_AS(write_file_atomically(subdir, "z"), ConfigError);
  CHECK_FALSE(exists(subdir + ".tmp"));

  std::remove(path.c_str());
  ::rmdir(subdir.c_str());
  ::rmdir(dir);
}
