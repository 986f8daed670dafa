// The perfsim command line: parses arguments and dispatches to the subcommands.
#pragma once

namespace perfsim {

// Returns the process exit code. Never throws: errors become one line on stderr.
int run_cli(int argc, char** argv);

}  // namespace perfsim
