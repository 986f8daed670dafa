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

TEST_CASE("cli output file: unusable targets are refused before the run") {
  char dir_template[] = "/tmp/perfsim_out_XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  REQUIRE(dir != nullptr);

  // A directory (with or without the trailing slash) is not a file name.
  CHECK_THROWS_WITH_AS(check_writable(dir), doctest::Contains("it is a directory"), ConfigError);
  CHECK_THROWS_WITH_AS(check_writable(std::string(dir) + "/"), doctest::Contains("it is a directory"),
                       ConfigError);

  // A file in a writable directory passes, and the probe leaves nothing behind.
  const std::string path = std::string(dir) + "/report.csv";
  CHECK_NOTHROW(check_writable(path));
  CHECK_FALSE(exists(path));
  CHECK_FALSE(exists(path + ".tmp"));

  // /proc accepts no new files even for root: refused up front, naming the target.
  CHECK_THROWS_WITH_AS(check_writable("/proc/perfsim_report.json"),
                       doctest::Contains("cannot write '/proc/perfsim_report.json'"), ConfigError);
  ::rmdir(dir);
}

TEST_CASE("cli output file: a device is written directly, never replaced") {
  char dir_template[] = "/tmp/perfsim_out_XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  REQUIRE(dir != nullptr);
  // A link to /dev/null stands for -o /dev/stdout: renaming a tmp file over it would replace
  // the link (or, for /dev/stdout itself, the device) with a regular file.
  const std::string link = std::string(dir) + "/out";
  REQUIRE(::symlink("/dev/null", link.c_str()) == 0);
  CHECK_NOTHROW(check_writable(link));
  write_file_atomically(link, "report\n");
  struct stat st {};
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK_FALSE(exists(link + ".tmp"));
  std::remove(link.c_str());
  ::rmdir(dir);
}
