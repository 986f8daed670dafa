// Atomic report files: write a sibling .tmp, flush, close, rename over the target. Devices and
// pipes (-o /dev/stdout) are written directly.
#include "cli/output_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/subcommands.hpp"
#include "core/errors.hpp"

namespace perfsim {

namespace {

std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

enum class Target { missing, regular, directory, special };

Target target_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Target::missing;
  if (S_ISREG(st.st_mode)) return Target::regular;
  if (S_ISDIR(st.st_mode)) return Target::directory;
  return Target::special;
}

[[noreturn]] void fail(const std::string& path, int err) {
  throw ConfigError(fmt::format("cannot write '{}': {}", path, std::strerror(err ? err : EIO)));
}

// Writes, flushes and closes `f`; returns 0 or the errno of the first failure.
int write_and_close(std::FILE* f, std::string_view content) {
  errno = 0;
  int err = 0;
  if (std::fwrite(content.data(), 1, content.size(), f) != content.size()) err = errno ? errno : EIO;
  if (std::fflush(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  return err;
}

// "out" for "out/" (a directory named with its slash), else the path itself.
std::string without_trailing_slash(const std::string& path) {
  return path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
}

}  // namespace

void check_writable(const std::string& path) {
  switch (target_kind(path)) {
    case Target::directory:
      throw ConfigError(fmt::format(
          "cannot write '{}': it is a directory; name a file, such as -o {}/report.json", path,
          without_trailing_slash(path)));
    case Target::special:
      if (::access(path.c_str(), W_OK) != 0) fail(path, errno);
      return;
    case Target::missing:
    case Target::regular:
      break;
  }
  const std::string dir = directory_of(path);
  if (::access(dir.c_str(), F_OK) != 0)
    throw ConfigError(fmt::format("cannot write '{}': directory '{}' does not exist", path, dir));
  if (::access(dir.c_str(), W_OK) != 0)
    throw ConfigError(fmt::format("cannot write '{}': directory '{}' is not writable", path, dir));
  // Creating the tmp file is the only reliable test (read-only file systems, /proc, ACLs).
  // Append mode leaves a file of that name untouched.
  const std::string tmp = path + ".tmp";
  const bool tmp_existed = ::access(tmp.c_str(), F_OK) == 0;
  std::FILE* f = std::fopen(tmp.c_str(), "ab");
  if (!f) fail(path, errno);
  std::fclose(f);
  if (!tmp_existed) std::remove(tmp.c_str());
}

void write_file_atomically(const std::string& path, std::string_view content) {
  if (target_kind(path) == Target::special) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) fail(path, errno);
    if (const int err = write_and_close(f, content)) fail(path, err);
    return;
  }
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(path, errno);
  if (const int err = write_and_close(f, content)) {
    std::remove(tmp.c_str());
    fail(path, err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(path, err);
  }
}

ReportFormat resolve_report_format(const std::string& format, const std::string& output) {
  if (!format.empty()) {
    if (auto f = parse_report_format(format)) return *f;
    throw UsageError(fmt::format("unknown format '{}': choose table, md, json or csv", format));
  }
  if (!output.empty())
    if (auto f = report_format_for_path(output)) return *f;
  return ReportFormat::table;
}

}  // namespace perfsim
