// The installed layout (cmake install rules in the top-level CMakeLists.txt): bin/perfsim and
// share/perfsim/{scenarios,examples,stdlib}. The executable's own path comes from
// /proc/self/exe, so a symlink to the binary (say in ~/.local/bin) still finds its share folder.
#include "cli/data_paths.hpp"

#include <filesystem>
#include <system_error>

namespace perfsim {

namespace {

namespace fs = std::filesystem;

// Set by the top-level CMakeLists.txt: the source tree, and the data folder relative to the
// folder of the installed binary ("../share/perfsim").
#ifdef PERFSIM_SOURCE_DIR
constexpr const char* source_dir = PERFSIM_SOURCE_DIR;
#else
constexpr const char* source_dir = "";
#endif
#ifdef PERFSIM_BIN_TO_DATA
constexpr const char* bin_to_data = PERFSIM_BIN_TO_DATA;
#else
constexpr const char* bin_to_data = "../share/perfsim";
#endif

}  // namespace

std::vector<std::string> data_dirs() {
  std::vector<std::string> dirs;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.has_parent_path()) dirs.push_back((exe.parent_path() / bin_to_data).lexically_normal().string());
  if (*source_dir != '\0') dirs.emplace_back(source_dir);
  return dirs;
}

std::string find_data_path(const std::string& relative) {
  std::error_code ec;
  const fs::path given(relative);
  if (given.empty() || given.is_absolute() || fs::exists(given, ec)) return relative;
  for (const std::string& dir : data_dirs()) {
    const fs::path candidate = fs::path(dir) / given;
    if (fs::exists(candidate, ec)) return candidate.lexically_normal().string();
  }
  return relative;
}

}  // namespace perfsim
