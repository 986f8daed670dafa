// Atomic report files: write a sibling .tmp, flush, close, rename over the target.
#include "cli/output_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace perfsim {

namespace {

std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void check_writable(const std::string& path) {
  const std::string dir = directory_of(path);
  if (::access(dir.c_str(), F_OK) != 0)
    throw ConfigError(fmt::format("cannot write '{}': directory '{}' does not exist", path, dir));
  if (::access(dir.c_str(), W_OK) != 0)
    throw ConfigError(fmt::format("cannot write '{}': directory '{}' is not writable", path, dir));
}

void write_file_atomically(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    throw ConfigError(fmt::format("cannot write '{}': {}", tmp, std::strerror(errno)));
  bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  ok = std::fflush(f) == 0 && ok;
  int err = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    throw ConfigError(fmt::format("cannot write '{}': {}", tmp, std::strerror(err ? err : EIO)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    throw ConfigError(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
  }
}

}  // namespace perfsim
