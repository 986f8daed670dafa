// perfsim entry point: everything happens in run_cli (cli/commands.cpp).
#include "cli/commands.hpp"

int main(int argc, char** argv) { return perfsim::run_cli(argc, argv); }
