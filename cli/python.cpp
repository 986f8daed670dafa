// `python3 - ARGS` with a script on stdin: posix_spawnp with a pipe as the child's stdin (no
// fork of a process that may hold BLAS or MPI threads), SIGPIPE held off while the script is
// written, so an interpreter that exits early is an exit status, not a crash.
#include "cli/python.hpp"

#include <cerrno>
#include <csignal>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/errors.hpp"

extern char** environ;

namespace perfsim {

namespace {

// Writes all of `text` to `fd`; false when the reader went away (EPIPE) or writing failed.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

int run_python(const std::string& interpreter, std::string_view script, const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw ConfigError(fmt::format("cannot start {}: no pipe", interpreter));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);

  std::vector<std::string> words = {interpreter, "-"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, interpreter.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[0]);
  if (spawned != 0) {
    ::close(fds[1]);
    return python_not_found;
  }
  // An interpreter that stops reading early (it failed to start) must not end perfsim by SIGPIPE.
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  (void)write_all(fds[1], script);
  ::close(fds[1]);
  ::sigaction(SIGPIPE, &previous, nullptr);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return python_not_found;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace perfsim
