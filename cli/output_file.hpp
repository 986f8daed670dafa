// Writing a report file whole or not at all, and choosing its format.
#pragma once
#include <string>
#include <string_view>

#include "core/files.hpp"
#include "core/report/report.hpp"

namespace perfsim {

// Throws ConfigError when `path` cannot be written (missing directory, a directory, no
// permission, read-only file system), so a long run fails before it starts rather than at the
// end. Probes by creating (exclusively) and removing a unique `path`.XXXXXX.tmp. Reports are
// then written with write_file_atomically (core/files.hpp).
void check_writable(const std::string& path);

// --format when given (UsageError when unknown), else the extension of -o FILE, else table.
[[nodiscard]] ReportFormat resolve_report_format(const std::string& format, const std::string& output);

}  // namespace perfsim
