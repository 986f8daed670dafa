# Precompiled headers: the standard and third-party headers nearly every source file includes
# (fmt, the containers, <algorithm> with its C++20 ranges) are parsed once instead of ~100,000
# lines per file, which is most of a compile here; on 2 cores that is minutes of `make run`.
# One header is built (on perfsim_base) and reused by every target compiled with the same
# flags; a compiler that finds it does not match a target's flags parses the headers as usual.
# -DPERFSIM_PCH=OFF turns it off (e.g. to check that every file includes what it uses).
option(PERFSIM_PCH "Precompile the common standard and third-party headers" ON)

set(PERFSIM_PCH_HEADERS
    <algorithm> <array> <cmath> <cstdint> <functional> <map> <memory> <optional> <set>
    <stdexcept> <string> <string_view> <utility> <vector> <fmt/format.h>)

# perfsim_use_pch(OWNER target... REUSERS target...): OWNER builds the header, the others reuse it.
function(perfsim_use_pch)
  if(NOT PERFSIM_PCH)
    return()
  endif()
  cmake_parse_arguments(PCH "" "OWNER" "REUSERS" ${ARGN})
  target_precompile_headers(${PCH_OWNER} PRIVATE ${PERFSIM_PCH_HEADERS})
  foreach(t IN LISTS PCH_REUSERS)
    if(TARGET ${t})
      target_precompile_headers(${t} REUSE_FROM ${PCH_OWNER})
    endif()
  endforeach()
endfunction()
