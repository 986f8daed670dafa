// The chart script, cli/plot/perfsim_plot.py, carried in the binary (scripts/embed_python.cmake
// generates the definition at build time).
#pragma once
#include <string_view>

namespace perfsim {

[[nodiscard]] std::string_view plot_script();

}  // namespace perfsim
