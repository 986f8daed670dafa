// Running a Python script the binary carries: `INTERPRETER - ARGS...` with the script on stdin,
// so it needs no file beside the binary.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace perfsim {

// Exit status of an interpreter that could not be started (as a shell reports it).
inline constexpr int python_not_found = 127;

// Runs `interpreter - args...` (interpreter found on PATH unless it holds a '/') with `script`
// fed on stdin; stdout and stderr are this process's. Returns the exit status, 128 + N when a
// signal N ended it, python_not_found when it could not be started.
[[nodiscard]] int run_python(const std::string& interpreter, std::string_view script,
                             const std::vector<std::string>& args);

}  // namespace perfsim
