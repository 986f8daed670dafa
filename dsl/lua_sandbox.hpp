// The file sandbox of scripts (reads only regular files under the script's directory, the
// module path and paths named on the command line; no writes), perfsim.write(name, text)
// under --output-dir, text-only chunk loading, and the time limit checked from the count hook.
// docs/DSL.md, "Sandbox and limits".
#pragma once
#include <lua.hpp>

#include <string>

namespace perfsim::dsl {

// Replaces io.open, io.lines, io.input and io.output by checked versions (the originals are
// kept in the registry, out of scripts' reach); call after the libraries are open, unless
// settings.unsafe.
void install_file_sandbox(lua_State* L);

// loadfile and dofile through read_script_file and load_text_chunk (with or without
// --unsafe: bytecode is never loaded).
void install_file_loaders(lua_State* L);

// Throws std::runtime_error "<what>('path'): ..." unless the script may read `path` (an allowed
// place, unless --unsafe; a regular file).
void check_script_readable(lua_State* L, const std::string& path, const char* what);

// The content of a file the script names (a module, a profile, a trace, a loadfile): an allowed
// place unless --unsafe, a regular file, at most max_input_file_bytes (core/files.hpp).
[[nodiscard]] std::string read_script_file(lua_State* L, const std::string& path, const char* what);

// luaL_loadbufferx in text mode, with a message that names bytecode when the text is a
// compiled chunk. Pushes the chunk (returns 0) or a message (returns an error code).
int load_text_chunk(lua_State* L, const std::string& text, const std::string& chunk_name);

// perfsim.write(name, text): writes text to --output-dir/name, whole or not at all. Returns
// the path written.
int api_write(lua_State* L);

// Raises a Lua error at the script's line once the deadline in force has passed. Called from
// the count hook; `before_error` runs first (it makes the hook fire on every instruction, so a
// pcall in the loop cannot keep catching the error).
void check_time_limit(lua_State* L, void (*before_error)(lua_State*));

}  // namespace perfsim::dsl
