// perfsim as one rank of a parallel run: the world when a launcher (mpirun,
// srun) started several processes, and `perfsim run --gpus N`, which starts
// them through mpirun on this node.
#pragma once
#include "core/run/communicator.hpp"

namespace perfsim {

// The ranks of this run, set up on first call when a launcher started more than
// one process (MPI initialized once for the life of the process); nullptr when
// perfsim runs alone. Ranks other than 0 send their standard output to
// /dev/null: rank 0 prints the one report. Throws NotExecutable when a launcher
// started several ranks but perfsim was built without MPI.
[[nodiscard]] Communicator* launched_ranks();

// Ends every rank after rank `ranks`'s error `message` (printed with the rank
// and its host): no rank is left waiting in a collective.
[[noreturn]] void abort_ranks(Communicator& ranks, const std::string& message, int code);

// `perfsim run ... --gpus N`: runs the same command line, less --gpus, as N
// ranks under mpirun on this node and returns its exit code. Throws UsageError
// when mpirun is missing.
[[nodiscard]] int relaunch_on_ranks(int gpus, int argc, char** argv);

}  // namespace perfsim
