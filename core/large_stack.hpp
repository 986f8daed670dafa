// Running work on a thread with a large stack. Scripts can recurse through C functions that
// call back into Lua (string.gsub with a function, table.sort with a comparator, require):
// each level takes C stack, and on a default 8 MiB stack the process would crash before the
// interpreter's own depth limit raised its "stack overflow" error. On LARGE_STACK_BYTES it
// never does: deep recursion ends in an error.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

namespace perfsim {

// Reserved address space, committed only as it is used.
inline constexpr std::size_t large_stack_bytes = std::size_t{1} << 30;

// Runs fn on a new thread with a large_stack_bytes stack and waits for it, or directly when
// the calling thread already has one. An exception fn throws is rethrown here.
void run_on_large_stack(const std::function<void()>& fn);

template <class F>
auto on_large_stack(F&& f) -> decltype(f()) {
  using R = decltype(f());
  if constexpr (std::is_void_v<R>) {
    run_on_large_stack([&] { f(); });
  } else {
    std::optional<R> result;
    run_on_large_stack([&] { result.emplace(f()); });
    return std::move(*result);
  }
}

}  // namespace perfsim
