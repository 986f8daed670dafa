// Writing a report file whole or not at all, and choosing its format.
#pragma once
#include <string>
#include <string_view>

#include "core/report/report.hpp"

namespace perfsim {

// Writes `content` to `path` through `path`.tmp in the same directory and a rename, so readers
// never see a partial file; on any failure the tmp file is removed and ConfigError thrown.
// A target that exists and is not a regular file (/dev/stdout, a pipe) is written directly:
// renaming over it would replace the device or pipe with a file.
void write_file_atomically(const std::string& path, std::string_view content);

// Throws ConfigError when `path` cannot be written (missing directory, a directory, no
// permission, read-only file system), so a long run fails before it starts rather than at the
// end. Probes by creating and removing `path`.tmp.
void check_writable(const std::string& path);

// --format when given (UsageError when unknown), else the extension of -o FILE, else table.
[[nodiscard]] ReportFormat resolve_report_format(const std::string& format, const std::string& output);

}  // namespace perfsim
