// Catalog access for C++ callers (`perfsim list`, the CLI's device lookup, tests): each call
// evaluates the stdlib catalogs (or their overrides on module_path) in a fresh state.
#include "core/errors.hpp"
#include "dsl/dsl.hpp"
#include "dsl/fresh_state.hpp"
#include "dsl/lua_catalog.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim {

namespace {

template <typename F>
auto with_catalog(const std::string& module_path, F&& f) {
  return dsl::in_fresh_state<ScriptError>(module_path, std::forward<F>(f));
}

}  // namespace

std::vector<Hardware> hardware_catalog(const std::string& module_path) {
  return with_catalog(module_path, [](lua_State* L) { return dsl::all_hardware(L); });
}

std::vector<ModelConfig> model_zoo(const std::string& module_path) {
  return with_catalog(module_path, [](lua_State* L) { return dsl::all_models(L); });
}

Hardware find_hardware(const std::string& name, const std::string& module_path) {
  return with_catalog(module_path, [&](lua_State* L) { return dsl::lookup_hardware(L, name); });
}

ModelConfig find_model(const std::string& name, const std::string& module_path) {
  return with_catalog(module_path, [&](lua_State* L) {
    ModelConfig m = dsl::lookup_model(L, name);
    validate(m);
    return m;
  });
}

}  // namespace perfsim
