// The stdlib Lua modules embedded in the binary (generated at build time from stdlib/*.lua).
#pragma once
#include <string_view>
#include <vector>

namespace perfsim {

struct EmbeddedFile {
  std::string_view name;     // module name: file name without ".lua"
  std::string_view source;
};

[[nodiscard]] const std::vector<EmbeddedFile>& stdlib_files();

}  // namespace perfsim
