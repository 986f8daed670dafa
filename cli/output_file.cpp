// Report files: checked before a run starts (check_writable), written whole or not at all
// through core/files.hpp's write_file_atomically.
#include "cli/output_file.hpp"

#include <cerrno>
#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/subcommands.hpp"
#include "core/errors.hpp"
#include "core/files.hpp"

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
  if (const int err = probe_file_creation(path)) fail(path, err);
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
