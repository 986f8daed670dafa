# Generates a C++ file holding cli/plot/perfsim_plot.py as a string, so the binary carries its
# chart script and runs it from any install location (cli/charts.cpp feeds it to python3).
# Usage: cmake -DOUT=file.cpp -DIN=cli/plot/perfsim_plot.py -P embed_python.cmake
file(READ ${IN} content)
string(FIND "${content}" ")perfsim_py\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} holds the raw string's closing delimiter )perfsim_py\"")
endif()
set(body "// Generated from cli/plot/perfsim_plot.py by scripts/embed_python.cmake. Do not edit.\n#include \"cli/plot_script.hpp\"\n\nnamespace perfsim {\n\nstd::string_view plot_script() {\n  static constexpr std::string_view script = R\"perfsim_py(${content})perfsim_py\";\n  return script;\n}\n\n}  // namespace perfsim\n")
file(WRITE ${OUT}.tmp "${body}")
file(RENAME ${OUT}.tmp ${OUT})
