// The files a run reads and writes, handled so that a hostile or unlucky path cannot hang,
// exhaust or corrupt anything:
//   - read_regular_file: regular files only (no FIFO, device or directory: a FIFO would block,
//     /dev/zero would never end), at most `max_bytes`;
//   - write_file_atomically: a unique temporary file beside the target (TARGET.XXXXXX.tmp), created exclusively
//     (a planted link is never followed), renamed over the target once complete; removed if the
//     write fails or the process is interrupted (SIGINT, SIGTERM, a hard time-limit stop).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace perfsim {

// Files a scenario names (traces, lengths, profiles, scripts) are text descriptions: 256 MiB is
// far above any of them.
inline constexpr std::size_t max_input_file_bytes = std::size_t{256} << 20;

// The whole content of `path`. Throws ConfigError "<what> 'path': ..." when it does not exist,
// is not a regular file, cannot be read or holds more than max_bytes.
[[nodiscard]] std::string read_regular_file(const std::string& path, const std::string& what,
                                            std::size_t max_bytes = max_input_file_bytes);

// Writes `content` to `path` whole or not at all (see above). A target that exists and is not a
// regular file (/dev/stdout, a pipe) is written directly. Throws ConfigError "cannot write
// 'path': ..." on failure, leaving the target as it was and no temporary file.
void write_file_atomically(const std::string& path, std::string_view content);

// Creates and removes a temporary file beside `path` (the only reliable test that a file can be
// made there: read-only file systems, /proc, ACLs), recorded like a write's so an interruption
// leaves nothing. Returns 0 or the errno of the failure.
[[nodiscard]] int probe_file_creation(const std::string& path);

// Removes the temporary files of writes in progress; async-signal-safe (the interruption
// handlers and the hard time-limit stop call it before the process ends).
void remove_temporary_files() noexcept;

// Installs SIGINT and SIGTERM handlers that remove temporary files, then end the process as
// the signal would have (once per process; later calls do nothing).
void remove_temporary_files_on_signals();

}  // namespace perfsim
