// Where the files perfsim ships beside its binary are found (the validation suites, the
// scenarios and examples): under the working directory first (a source tree or a copy of it),
// then in the installed layout <prefix>/share/perfsim next to <prefix>/bin/perfsim, then in the
// source tree the binary was built from. The stdlib itself is embedded in the binary.
#pragma once
#include <string>
#include <vector>

namespace perfsim {

// The directories searched after the working directory, in order: <exe>/../share/perfsim
// (an installed binary) and the source tree of the build (a binary run from its build folder).
[[nodiscard]] std::vector<std::string> data_dirs();

// `relative` ("scenarios/validation") unchanged when it exists from the working directory (or is
// absolute); else its path under the first of data_dirs() that holds it; else unchanged, so
// that the caller's "not found" names what was asked for.
[[nodiscard]] std::string find_data_path(const std::string& relative);

}  // namespace perfsim
