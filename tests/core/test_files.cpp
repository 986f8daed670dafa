// Checked reads and atomic writes (core/files.hpp): special files refused, sizes bounded, a
// planted link never followed, concurrent writers each leaving a whole file.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <cerrno>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.hpp"
#include "core/files.hpp"

using namespace perfsim;
namespace fs = std::filesystem;

namespace {

struct ScratchDir {
  fs::path path;
  ScratchDir() {
    char name[] = "/tmp/perfsim_files_XXXXXX";
    path = ::mkdtemp(name);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

}  // namespace

TEST_CASE("read_regular_file: regular files whole; directories, FIFOs, devices and oversize files refused") {
  ScratchDir dir;
  const fs::path text = dir.path / "trace.jsonl";
  std::ofstream(text) << "{\"arrival\": 0}\n";
  CHECK(read_regular_file(text.string(), "trace") == "{\"arrival\": 0}\n");

  CHECK_THROWS_WITH_AS(read_regular_file((dir.path / "none").string(), "trace"),
                       doctest::Contains("trace '/tmp/perfsim_files_"), ConfigError);
  CHECK_THROWS_WITH_AS(read_regular_file((dir.path / "none").string(), "trace"), doctest::Contains("': no such file"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(read_regular_file(dir.path.string(), "trace"), doctest::Contains("is a directory"), ConfigError);
  // A FIFO with no writer: refused at once, never waited on.
  const fs::path fifo = dir.path / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(read_regular_file(fifo.string(), "trace"), doctest::Contains("not a regular file"), ConfigError);
  CHECK_THROWS_WITH_AS(read_regular_file("/dev/zero", "trace"), doctest::Contains("not a regular file"), ConfigError);
  // Over the bound: 15 bytes against 8.
  CHECK_THROWS_WITH_AS(read_regular_file(text.string(), "trace", 8),
                       doctest::Contains("15 bytes is over the limit of 8 bytes"), ConfigError);
  CHECK(read_regular_file(text.string(), "trace", 15).size() == 15);
}

TEST_CASE("write_file_atomically: a planted link at the old temporary name is never followed") {
  ScratchDir dir;
  const fs::path victim = dir.path / "victim.txt";
  std::ofstream(victim) << "keep";
  const fs::path target = dir.path / "report.json";
  fs::create_symlink(victim, dir.path / "report.json.tmp");
  write_file_atomically(target.string(), "{}\n");
  CHECK(slurp(target) == "{}\n");
  CHECK(slurp(victim) == "keep");
  // Only the report, the victim and the planted link: no temporary file is left.
  CHECK(names_in(dir.path).size() == 3);
  // A new report is as readable as any new file (the temporary file is created 0600).
  struct stat st {};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  const mode_t mask = ::umask(022);
  ::umask(mask);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));
}

TEST_CASE("write_file_atomically: concurrent writers each leave a whole file") {
  ScratchDir dir;
  const fs::path target = dir.path / "report.txt";
  std::vector<std::string> contents;
  for (char c : std::string("abcdefgh")) contents.emplace_back(std::size_t{1} << 20, c);  // 1 MiB each
  std::vector<std::thread> writers;
  for (const std::string& c : contents) writers.emplace_back([&target, &c] { write_file_atomically(target.string(), c); });
  for (std::thread& t : writers) t.join();
  const std::string result = slurp(target);
  REQUIRE(result.size() == std::size_t{1} << 20);
  CHECK(result.find_first_not_of(result[0]) == std::string::npos);  // one writer's file, whole
  CHECK(names_in(dir.path) == std::vector<std::string>{"report.txt"});
}

TEST_CASE("write_file_atomically: a failed write leaves the target as it was and no temporary file") {
  ScratchDir dir;
  const fs::path sub = dir.path / "sub";
  fs::create_directory(sub);
  // Renaming a file over a directory fails.
  CHECK_THROWS_WITH_AS(write_file_atomically(sub.string(), "x"), doctest::Contains("cannot write"), ConfigError);
  CHECK(fs::is_directory(sub));
  CHECK(names_in(dir.path) == std::vector<std::string>{"sub"});
  CHECK_THROWS_AS(write_file_atomically((dir.path / "no" / "such" / "r.json").string(), "x"), ConfigError);
}

TEST_CASE("probe_file_creation: leaves nothing behind and names the failure") {
  ScratchDir dir;
  CHECK(probe_file_creation((dir.path / "report.json").string()) == 0);
  CHECK(names_in(dir.path).empty());
  CHECK(probe_file_creation((dir.path / "missing" / "report.json").string()) == ENOENT);
}
