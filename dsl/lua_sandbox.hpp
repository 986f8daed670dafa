// The file sandbox of scripts (reads only under the script's directory, the module path and
// paths named on the command line; no writes), perfsim.write(name, text) under --output-dir,
// and the time and memory limits checked from the count hook. docs/DSL.md, "Sandbox and limits".
#pragma once
#include <lua.hpp>

namespace perfsim::dsl {

// Replaces io.open, io.lines, io.input, io.output, dofile, loadfile and os.tmpname by checked
// versions; call after the libraries are open, unless settings.unsafe.
void install_file_sandbox(lua_State* L);

// perfsim.write(name, text): writes text to --output-dir/name, whole or not at all. Returns
// the path written.
int api_write(lua_State* L);

// Raises a Lua error at the script's line once the deadline has passed or the Lua heap is over
// settings.memory_limit. Called from the count hook; `before_error` runs first (it makes the
// hook fire on every instruction, so a pcall in the loop cannot keep catching the error).
void check_limits(lua_State* L, void (*before_error)(lua_State*));

}  // namespace perfsim::dsl
