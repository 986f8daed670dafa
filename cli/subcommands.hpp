// The subcommands behind `perfsim run | list | explain | search`: their options, parsed arguments
// in, exit code out. command_table.cpp lists the commands; commands.cpp parses the command line and
// turns exceptions into "perfsim: error: ..." lines.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/run/rank_execution.hpp"
#include "dsl/dsl.hpp"

namespace CLI {
class App;
}

namespace perfsim {

// A command line that cannot be acted on (bad --set, unknown list category): exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Arguments every command that loads a script shares.
struct ScriptArgs {
  std::string scenario;             // path of the Lua script
  std::vector<std::string> sets;    // --set key=value, in order
  std::string module_path;          // --module-path
  std::string backend = "auto";     // auto | cpu | cuda | none
  std::string profile;              // --profile NAME|FILE|datasheet; empty: resolve_device_profile's search
  bool unsafe = false;              // --unsafe: no file sandbox for the script
  double timeout = default_script_timeout_s;  // --timeout SECONDS the script may run; 0 = no limit
  double run_timeout = 0;           // --run-timeout SECONDS the whole command may run; 0 = no limit
  std::string output_dir;           // --output-dir DIR for perfsim.write
};

struct RunArgs : ScriptArgs {
  std::string format;               // empty: from the -o extension, else table
  std::string output;               // -o FILE; empty = stdout
  std::string trace;                // --trace FILE: Chrome trace-event JSON of the steps
  std::string vllm_json;            // --vllm-json DIR: vLLM benchmark JSON per serve step
  std::string plots;                // --plots DIR: the report's charts (cli/charts.hpp)
  bool quiet = false;
  bool no_cache = false;            // --no-cache: no first-use CPU calibration (cli/host_profile_cache.hpp)
  int gpus = 0;                     // --gpus N: run as N ranks under mpirun (0, 1: this process)
  double rank_timeout = default_rank_timeout_s;  // --rank-timeout SECONDS a rank may spend on one step
};

struct ListArgs {
  std::string category;             // hardware | models | optimizations
  std::string module_path;
};

struct ExplainArgs : ScriptArgs {
  ExplainArgs() { backend = "none"; }  // explain prices; with a backend only its device's profile
  std::string step;                 // empty: the last stack step
  std::string hardware;             // empty: the backend's device, else the scenario's first
  int stage = 0;                    // pipeline stage whose rank is shown (parallel layouts)
};

// `perfsim search`: the layout space of core/parallel/search.hpp, from the command line.
struct SearchArgs : ScriptArgs {
  SearchArgs() { backend = "none"; }  // search only prices
  int gpus = 0;                     // --gpus; 0: the scenario's layout's GPUs
  int top = 10;
  std::string hardware;             // --hardware NAME; empty: --profile, else the scenario's first
  std::string format;               // table | json | csv; empty: from -o's extension, else table
  std::string output;
  bool recompute = false;           // also try full recompute (and without it)
  bool cp = false;                  // also try context parallelism
  bool uneven_pp = false;           // keep pipelines with unequal stages
  int64_t global_batch = 0;         // sequences; 0: the scenario's batch · grad_accum · dp
  std::vector<int> tp, pp, zero, interleave, ep;
  std::vector<int64_t> micro_batch;
  int threads = 0;
  bool quiet = false;               // no progress line on stderr
};

// Each command's arguments and options registered on its CLI11 subcommand `cmd`, filling `a` when
// parsed; then the command itself.
void add_run_options(CLI::App& cmd, RunArgs& a);
void add_list_options(CLI::App& cmd, ListArgs& a);
void add_explain_options(CLI::App& cmd, ExplainArgs& a);
void add_search_options(CLI::App& cmd, SearchArgs& a);
[[nodiscard]] int cmd_run(const RunArgs& a);
[[nodiscard]] int cmd_list(const ListArgs& a);
[[nodiscard]] int cmd_explain(const ExplainArgs& a);
[[nodiscard]] int cmd_search(const SearchArgs& a);

// DslSettings from --set/--module-path/--backend; throws UsageError for a --set without '='.
[[nodiscard]] DslSettings make_dsl_settings(const ScriptArgs& a, bool options_only = false);
// The options a script declares, as a table for `perfsim run SCRIPT --help`.
[[nodiscard]] std::string describe_script_options(const ScriptArgs& a);

}  // namespace perfsim
