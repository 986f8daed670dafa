// The perfsim commands as one table: each command's name, its line in `perfsim --help`, the
// options it registers and the function that runs it. run_cli (commands.cpp) registers, finds
// and runs commands through this table alone.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace perfsim {

struct ScriptArgs;

// What run_cli reads of a command's parsed arguments besides running it.
struct CommonArgs {
  const ScriptArgs* script_help = nullptr;  // `COMMAND SCRIPT --help` also lists this script's options
  bool unsafe = false;                      // --unsafe: its scripts run without the sandbox
  double run_timeout = 0;                   // --run-timeout SECONDS for the whole command; 0: no limit
  int gpus = 0;                             // --gpus N: the ranks it runs as (0: this process alone)
};

struct Command {
  std::string name;
  std::string summary;  // its line in `perfsim --help`
  // Its place in the "choose run, list, ..." line of a missing or unknown command, which is also
  // the order "did you mean" tries the names in.
  int hint_position = 0;
  bool runs_on_ranks = false;                  // it may run as one of several ranks (mpirun, srun, --gpus)
  std::function<void(CLI::App&)> add_options;  // registers its arguments on its subcommand
  std::function<CommonArgs()> common;          // read once the command line is parsed
  std::function<int()> run;                    // its exit code
  CLI::App* app = nullptr;                     // its subcommand, once make_app registered it
};

// Every command, in the order `perfsim --help` lists them, each holding fresh arguments.
[[nodiscard]] std::vector<Command> make_commands();

// The top-level parser with each of `commands` registered as a subcommand (setting Command::app).
[[nodiscard]] std::unique_ptr<CLI::App> make_app(std::vector<Command>& commands);

// The commands' names in hint_position order.
[[nodiscard]] std::vector<std::string> hint_names(const std::vector<Command>& commands);

}  // namespace perfsim
