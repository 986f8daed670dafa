// The script sandbox and limits: writes refused, reads only near the script, perfsim.write
// under --output-dir, --unsafe, --timeout and the memory cap.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_dsl_support.hpp"

using namespace perfsim;
using namespace perfsim::test;

namespace {

namespace fs = std::filesystem;

const std::string write_advice =
    "scripts cannot write files; use perfsim.write(name, text) with --output-dir DIR, or run with --unsafe";

// A file outside the scripts' directory, to read or to write.
fs::path outside_dir() {
  const fs::path dir = fs::temp_directory_path() / ("perfsim_sandbox_out_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

struct OutsideCleanup {
  ~OutsideCleanup() {
    std::error_code ec;
    fs::remove_all(outside_dir(), ec);
  }
};
const OutsideCleanup outside_cleanup;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("dsl sandbox: writing files is refused with the script's line and what to do") {
  const std::string target = (outside_dir() / "x").string();
  const std::pair<const char*, std::string> cases[] = {
      {"io.open w", "local a = 1\nlocal f = io.open('" + target + "', 'w')\n"},
      {"io.open a+", "local a = 1\nlocal f = io.open('" + target + "', 'a+')\n"},
      {"io.output", "local a = 1\nio.output('" + target + "')\n"},
  };
  for (const auto& c : cases) {
    const std::string& what = c.first;  // a plain name: doctest's CAPTURE cannot take bindings
    const std::string& text = c.second;
    CAPTURE(what);
    const std::string file = write_script("writes.lua", text);
    const std::string msg = script_error(file);
    CHECK(starts_with(msg, file + ":2: "));
    CHECK(contains(msg.substr(0, msg.find('\n')), write_advice));
    CHECK_FALSE(fs::exists(target));
  }
  // Removing, renaming and running programs stay out of reach.
  const std::string rm = write_script("remove.lua", "os.remove('" + target + "')\n");
  CHECK(starts_with(script_error(rm), rm + ":1: os.remove is not available to scripts"));
  const std::string popen = write_script("popen.lua", "io.popen('true')\n");
  CHECK(starts_with(script_error(popen), popen + ":1: io.popen is not available to scripts"));
  const std::string tmpname = write_script("tmpname.lua", "local n = os.tmpname()\n");
  CHECK(starts_with(script_error(tmpname), tmpname + ":1: os.tmpname is not available to scripts"));
  // The timeout's hook cannot be removed: debug has only traceback.
  const std::string hook = write_script("hook.lua", "debug.sethook()\n");
  CHECK(starts_with(script_error(hook), hook + ":1: debug.sethook is not available to scripts"));
}

TEST_CASE("dsl sandbox: reads only under the script's directory, the module path and named paths") {
  const fs::path secret = outside_dir() / "secret.txt";
  std::ofstream(secret) << "secret\n";
  for (const std::string call : {"io.open('" + secret.string() + "')", "io.lines('" + secret.string() + "')",
                                 "dofile('" + secret.string() + "')", "loadfile('" + secret.string() + "')",
                                 "io.input('" + secret.string() + "')"}) {
    CAPTURE(call);
    const std::string file = write_script("reads.lua", "local x = " + call + "\n");
    const std::string msg = script_error(file);
    CHECK(starts_with(msg, file + ":1: "));
    CHECK(contains(msg, "scripts may read only files under the script's directory"));
    CHECK(contains(msg, "--unsafe"));
  }
  // A path that climbs out of the script's directory is refused too.
  const std::string climb = write_script("climb.lua", "local f = io.open('" +
                                                          (script_dir() / ".." / "etc_passwd_nope").string() +
                                                          "')\n");
  CHECK(contains(script_error(climb), "scripts may read only files"));

  // Next to the script: allowed.
  const std::string data = write_script("data.txt", "42\n");
  const std::string ok = write_script("reads_ok.lua", "local f = assert(io.open('" + data +
                                                          "'))\nassert(f:read('*n') == 42)\nf:close()\n"
                                                          "for l in io.lines('" + data + "') do end\n");
  CHECK_NOTHROW((void)run_script(ok));
  // Named on the command line: allowed.
  const std::string named = write_script("reads_named.lua", "local f = assert(io.open('" + secret.string() +
                                                                "', 'rb'))\nf:close()\n");
  DslSettings settings;
  settings.readable_paths.push_back(secret.string());
  CHECK_NOTHROW((void)run_script(named, settings));
  // On the module path: allowed.
  DslSettings modpath;
  modpath.module_path = outside_dir().string();
  CHECK_NOTHROW((void)run_script(named, modpath));
  // --unsafe reads anything.
  DslSettings unsafe;
  unsafe.unsafe = true;
  CHECK_NOTHROW((void)run_script(named, unsafe));
}

TEST_CASE("dsl sandbox: --unsafe lets a script write files") {
  const fs::path target = outside_dir() / "unsafe.txt";
  const std::string file =
      write_script("unsafe.lua", "local f = assert(io.open('" + target.string() + "', 'w'))\nf:write('x')\nf:close()\n");
  DslSettings settings;
  settings.unsafe = true;
  CHECK_NOTHROW((void)run_script(file, settings));
  CHECK(slurp(target) == "x");
}

TEST_CASE("dsl sandbox: perfsim.write writes under --output-dir only") {
  const fs::path out = outside_dir() / "out";
  const std::string file = write_script(
      "writes_out.lua", "local p = perfsim.write('sub/result.csv', 'a,b\\n1,2\\n')\nassert(p:find('result.csv'))\n");
  // Without --output-dir: refused.
  const std::string msg = script_error(file);
  CHECK(starts_with(msg, file + ":1: perfsim.write('sub/result.csv'): no output directory; run with --output-dir DIR"));
  // With it: written whole, no temp file left.
  DslSettings settings;
  settings.output_dir = out.string();
  CHECK_NOTHROW((void)run_script(file, settings));
  CHECK(slurp(out / "sub" / "result.csv") == "a,b\n1,2\n");
  CHECK_FALSE(fs::exists(out / "sub" / "result.csv.tmp"));
  // Names that leave the directory: refused.
  for (const std::string name : {"../escape.txt", "a/../../escape.txt", "/tmp/abs.txt", ""}) {
    CAPTURE(name);
    const std::string bad = write_script("writes_bad.lua", "local a = 1\nperfsim.write('" + name + "', 'x')\n");
    const std::string m = script_error(bad, settings);
    CHECK(starts_with(m, bad + ":2: perfsim.write('" + name + "'): name a file inside --output-dir"));
  }
  CHECK_FALSE(fs::exists(outside_dir() / "escape.txt"));
  // The output directory can be read back.
  const std::string back = write_script(
      "reads_back.lua", "local f = assert(io.open('" + (out / "sub" / "result.csv").string() + "'))\nf:close()\n");
  CHECK_NOTHROW((void)run_script(back, settings));
}

TEST_CASE("dsl sandbox: --timeout stops an endless loop at its line") {
  DslSettings settings;
  settings.timeout_s = 0.2;
  for (const std::string loop : {"while true do end", "local x = 0\nfor i = 1, 1e15 do x = x + i end",
                                 "local function f(n) return n + 1 end\nlocal n = 0\nwhile true do n = f(n) end"}) {
    CAPTURE(loop);
    const std::string file = write_script("loop.lua", "local a = 1\n" + loop + "\n");
    const auto start = std::chrono::steady_clock::now();
    const std::string msg = script_error(file, settings);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(took < 5);
    CHECK(starts_with(msg, file + ":"));
    CHECK(contains(msg.substr(0, msg.find('\n')),
                   ": script ran longer than --timeout 0.2 s (raise --timeout or fix the loop)"));
    CHECK_FALSE(starts_with(msg, file + ":1:"));  // the loop's line, not the first
  }
  const std::string first = write_script("loop_line.lua", "local a = 1\nwhile true do end\n");
  CHECK(starts_with(script_error(first, settings), first + ":2: script ran longer than --timeout 0.2 s"));
  // A pcall inside the loop does not swallow the timeout for good.
  const std::string caught =
      write_script("loop_pcall.lua", "while true do pcall(function() for i = 1, 100 do end end) end\n");
  CHECK(contains(script_error(caught, settings), "script ran longer than --timeout 0.2 s"));
}

TEST_CASE("dsl sandbox: the memory cap ends a memory bomb with an error") {
  DslSettings settings;
  settings.memory_limit = std::size_t{64} << 20;
  const std::string file = write_script(
      "bomb.lua", "local t = {}\nfor i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end\n");
  const std::string msg = script_error(file, settings);
  CHECK(starts_with(msg, file + ":2: script used more than 64 MiB of memory"));
  // A script well under the cap runs.
  const std::string small = write_script("small.lua", "local t = {}\nfor i = 1, 1000 do t[i] = string.rep('x', 100) end\n");
  CHECK_NOTHROW((void)run_script(small, settings));
}
