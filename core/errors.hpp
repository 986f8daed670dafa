// Exceptions that carry a message a user can act on; the CLI prints them on one line.
#pragma once
#include <stdexcept>
#include <string>

namespace perfsim {

// A configuration that cannot describe a real run (bad sizes, unknown names).
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A valid configuration that does not fit its hardware's memory: a run with several steps notes
// it for that step and goes on.
struct DoesNotFit : ConfigError {
  using ConfigError::ConfigError;
};

// A backend cannot execute something (unsupported dtype, does not fit).
struct NotExecutable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace perfsim
