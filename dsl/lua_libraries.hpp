// The Lua environment of scripts, profiles and catalogs: the standard libraries cut to an
// allow-list (lua_libraries.cpp says what is left out and why), text-only loading, and the
// file sandbox unless --unsafe.
#pragma once
#include <lua.hpp>

namespace perfsim::dsl {

// Opens the allowed libraries into a new state. `unsafe` (--unsafe) keeps the file functions
// whole and gives back os.execute, os.remove, os.rename, os.tmpname, io.popen and io.tmpfile.
void open_script_libraries(lua_State* L, bool unsafe);

}  // namespace perfsim::dsl
