# Generates a C++ file holding every stdlib/*.lua as a string, so the binary carries its stdlib.
# Usage: cmake -DOUT=file.cpp -DDIR=stdlib -P embed_lua.cmake
file(GLOB files ${DIR}/*.lua)
list(SORT files)
set(body "// Generated from stdlib/*.lua by scripts/embed_lua.cmake. Do not edit.\n#include \"dsl/stdlib_files.hpp\"\n\nnamespace perfsim {\n\nconst std::vector<EmbeddedFile>& stdlib_files() {\n  static const std::vector<EmbeddedFile> files = {\n")
foreach(f ${files})
  get_filename_component(name ${f} NAME_WE)
  file(READ ${f} content)
  string(APPEND body "    {\"${name}\", R\"perfsim_lua(${content})perfsim_lua\"},\n")
endforeach()
string(APPEND body "  };\n  return files;\n}\n\n}  // namespace perfsim\n")
file(WRITE ${OUT}.tmp "${body}")
file(RENAME ${OUT}.tmp ${OUT})
