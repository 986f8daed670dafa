#include "core/files.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>

#include "core/errors.hpp"

namespace perfsim {

namespace {

// ---- reading ----

class Fd {
 public:
  explicit Fd(int fd) : m_fd(fd) {}
  ~Fd() {
    if (m_fd >= 0) ::close(m_fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const { return m_fd; }
  int release() {
    const int fd = m_fd;
    m_fd = -1;
    return fd;
  }

 private:
  int m_fd;
};

std::string size_text(std::size_t bytes) {
  return bytes >= (std::size_t{1} << 20) ? fmt::format("{} MiB", bytes >> 20) : fmt::format("{} bytes", bytes);
}

// ---- temporary files: a fixed table the signal handlers can walk ----

constexpr std::size_t max_temporaries = 64;
constexpr std::size_t max_temporary_path = 4096;
struct Slot {
  std::atomic<bool> used{false};
  char path[max_temporary_path] = {};
};
std::array<Slot, max_temporaries> g_temporaries;
std::mutex g_temporaries_mutex;

// Records `path` for removal on interruption; returns its slot, or -1 when the table is full
// (the file is then only removed by the normal path).
int remember_temporary(const std::string& path) {
  if (path.size() >= max_temporary_path) return -1;
  const std::lock_guard<std::mutex> lock(g_temporaries_mutex);
  for (std::size_t i = 0; i < g_temporaries.size(); ++i) {
    Slot& s = g_temporaries[i];
    if (s.used.load()) continue;
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.used.store(true);
    return static_cast<int>(i);
  }
  return -1;
}

void forget_temporary(int slot) {
  if (slot < 0) return;
  const std::lock_guard<std::mutex> lock(g_temporaries_mutex);
  g_temporaries[static_cast<std::size_t>(slot)].used.store(false);
}

// Creates `path`.XXXXXX.tmp exclusively (O_CREAT | O_EXCL: an existing name, link or not, is
// never opened, and concurrent writers each get their own) and records it for removal *before*
// it exists, so an interruption at any moment, in any thread, leaves no file behind. Returns
// the descriptor (or -1 with errno set), the name and the slot.
struct Temporary {
  int fd = -1;
  std::string name;
  int slot = -1;
};
Temporary create_temporary(const std::string& path) {
  static constexpr char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 random{std::random_device{}() ^ static_cast<std::uint64_t>(::getpid())};
  for (int attempt = 0; attempt < 100; ++attempt) {
    Temporary t;
    t.name = path + ".";
    for (int i = 0; i < 6; ++i) t.name += letters[random() % (sizeof letters - 1)];
    t.name += ".tmp";
    t.slot = remember_temporary(t.name);
    t.fd = ::open(t.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (t.fd >= 0) return t;
    const int err = errno;
    forget_temporary(t.slot);
    if (err != EEXIST) {
      errno = err;
      return {};
    }
  }
  errno = EEXIST;
  return {};
}

void on_signal(int sig) {
  remove_temporary_files();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

[[noreturn]] void fail_write(const std::string& path, int err) {
  throw ConfigError(fmt::format("cannot write '{}': {}", path, std::strerror(err != 0 ? err : EIO)));
}

// The process's umask, read without changing it: a umask(0) window would give files that
// other threads create meanwhile the wrong permissions. Linux reports it in /proc/self/status.
mode_t current_umask() {
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned mask = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f) != nullptr) found = std::sscanf(line, "Umask: %o", &mask) == 1;
    std::fclose(f);
    if (found) return static_cast<mode_t>(mask);
  }
  return 022;
}

// Writes all of `content` to `fd`; returns 0 or the errno of the failure.
int write_all(int fd, std::string_view content) {
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno != 0 ? errno : EIO;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

std::string read_regular_file(const std::string& path, const std::string& what, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) throw ConfigError(fmt::format("{} '{}': no such file", what, path));
    throw ConfigError(fmt::format("{} '{}': cannot open: {}", what, path, std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw ConfigError(fmt::format("{} '{}': cannot read: {}", what, path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw ConfigError(fmt::format("{} '{}': is a directory; name a file", what, path));
  if (!S_ISREG(st.st_mode))
    throw ConfigError(fmt::format("{} '{}': not a regular file (a device, pipe or socket); name a file", what, path));
  if (static_cast<std::size_t>(st.st_size) > max_bytes)
    throw ConfigError(fmt::format("{} '{}': {} is over the limit of {}", what, path,
                                  size_text(static_cast<std::size_t>(st.st_size)), size_text(max_bytes)));
  // Back to blocking reads; a regular file never blocks for long.
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw ConfigError(fmt::format("{} '{}': cannot read: {}", what, path, std::strerror(errno)));
    }
    if (n == 0) break;
    // A file that grows while it is read is held to the same limit.
    if (text.size() + static_cast<std::size_t>(n) > max_bytes)
      throw ConfigError(fmt::format("{} '{}': over the limit of {}", what, path, size_text(max_bytes)));
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

void write_file_atomically(const std::string& path, std::string_view content) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    // A device or pipe: renaming over it would replace it with a file.
    Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (fd.get() < 0) fail_write(path, errno);
    if (const int err = write_all(fd.get(), content)) fail_write(path, err);
    return;
  }
  Temporary tmp = create_temporary(path);
  if (tmp.fd < 0) fail_write(path, errno);
  Fd fd(tmp.fd);
  const std::string& name = tmp.name;
  const int slot = tmp.slot;
  int err = 0;
  // The file was created private (0600); a report is as readable as any new file.
  if (::fchmod(fd.get(), 0666 & ~current_umask()) != 0) err = errno;
  if (err == 0) err = write_all(fd.get(), content);
  if (::close(fd.release()) != 0 && err == 0) err = errno != 0 ? errno : EIO;
  if (err == 0 && ::rename(name.c_str(), path.c_str()) != 0) err = errno != 0 ? errno : EIO;
  if (err != 0) ::unlink(name.c_str());
  forget_temporary(slot);
  if (err != 0) fail_write(path, err);
}

int probe_file_creation(const std::string& path) {
  const Temporary tmp = create_temporary(path);
  if (tmp.fd < 0) return errno != 0 ? errno : EIO;
  ::close(tmp.fd);
  ::unlink(tmp.name.c_str());
  forget_temporary(tmp.slot);
  return 0;
}

void remove_temporary_files() noexcept {
  for (Slot& s : g_temporaries)
    if (s.used.load()) ::unlink(s.path);
}

void remove_temporary_files_on_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM}) {
      struct sigaction sa {};
      sa.sa_handler = on_signal;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

}  // namespace perfsim
