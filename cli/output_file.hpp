// Writing a report file whole or not at all.
#pragma once
#include <string>
#include <string_view>

namespace perfsim {

// Writes `content` to `path` through `path`.tmp in the same directory and a rename, so readers
// never see a partial file; on any failure the tmp file is removed and ConfigError thrown.
void write_file_atomically(const std::string& path, std::string_view content);

// Throws ConfigError when `path` cannot be created (missing directory, no permission), so a
// long run fails before it starts rather than at the end.
void check_writable(const std::string& path);

}  // namespace perfsim
