#include "cli/commands.hpp"

#include <cstdio>

namespace perfsim {

int run_cli(int, char**) {
  std::fputs("perfsim: not implemented yet\n", stderr);
  return 1;
}

}  // namespace perfsim
