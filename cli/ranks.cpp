// launched_ranks, abort_ranks and relaunch_on_ranks (see ranks.hpp).
#include "cli/ranks.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/mpi/mpi_world.hpp"
#include "cli/subcommands.hpp"
#include "core/errors.hpp"

namespace perfsim {


Communicator* launched_ranks() {
  static std::unique_ptr<MpiWorld> world;
  static bool checked = false;
  if (!checked) {
    checked = true;
    const int size = launcher_world_size();
    if (size > 1) {
      if (!mpi_available())
        throw NotExecutable(
            fmt::format("started as one of {} ranks, but this perfsim was "
                        "built without MPI: "
                        "install OpenMPI (scripts/install_deps.sh) and rebuild",
                        size));
      use_local_gpu();  // before anything touches CUDA
      world = std::make_unique<MpiWorld>();
      if (world->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
        throw NotExecutable("cannot silence the standard output of a rank other than 0");
    }
  }
  return world.get();
}

void abort_ranks(Communicator& ranks, const std::string& message, int code) {
  std::fflush(stdout);
  fmt::print(stderr, "perfsim: error: rank {} of {} on {}: {}\n", ranks.rank(), ranks.size(), ranks.host(), message);
  std::fflush(stderr);
  ranks.abort(code);
  std::_Exit(code);  // abort does not return; this keeps the compiler sure of it
}

namespace {

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = dirs.find(':', start);
    const std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return {};
}

}  // namespace

int relaunch_on_ranks(int gpus, int argc, char** argv) {
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty())
    throw UsageError(
        fmt::format("--gpus {} starts {} ranks with mpirun, which is not on PATH: install "
                    "OpenMPI "
                    "(scripts/install_deps.sh), or start perfsim with your launcher "
                    "(mpirun -np {} perfsim run ..., srun -n {} perfsim run ...)",
                    gpus, gpus, gpus, gpus));
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  std::vector<std::string> args = {mpirun, "-np", std::to_string(gpus), "--bind-to", "none"};
  if (::geteuid() == 0) args.push_back("--allow-run-as-root");
  // More ranks than cores (CPU ranks on a small machine) is allowed: the run
  // says so.
  if (static_cast<unsigned>(gpus) > std::thread::hardware_concurrency()) args.push_back("--oversubscribe");
  args.push_back(ec ? std::string(argv[0]) : self);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--gpus") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--gpus=", 0) == 0) continue;
    args.push_back(a);
  }
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw NotExecutable(fmt::format("cannot start mpirun: {}", std::strerror(errno)));
  if (pid == 0) {
    ::execv(mpirun.c_str(), cargs.data());
    std::fprintf(stderr, "perfsim: error: cannot run %s: %s\n", mpirun.c_str(), std::strerror(errno));
    std::_Exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw NotExecutable(fmt::format("waiting for mpirun: {}", std::strerror(errno)));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace perfsim
