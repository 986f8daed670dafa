// A backend's kernels by op kind: one entry per kind it runs, found by lookup rather than a
// switch, so the kinds a backend runs can be listed (tests sweep them) and a kind it lacks is
// an answer ("no kernel"), not a fall-through.
#pragma once
#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include "core/graph/op_kind.hpp"

namespace perfsim::ops {

template <class Kernel>
class KernelTable {
 public:
  struct Entry {
    OpKind kind;
    Kernel run;
  };
  // Throws std::logic_error when a kind is named twice or an entry has no kernel.
  KernelTable(std::initializer_list<Entry> entries) {
    for (const Entry& e : entries) {
      Kernel& slot = m_kernels.at(static_cast<std::size_t>(e.kind));
      if (slot != nullptr) throw std::logic_error(fmt::format("kernel table: {} named twice", name_of(e.kind)));
      if (e.run == nullptr) throw std::logic_error(fmt::format("kernel table: {} has no kernel", name_of(e.kind)));
      slot = e.run;
    }
  }
  // The kernel of kind k, or nullptr.
  [[nodiscard]] Kernel find(OpKind k) const { return m_kernels.at(static_cast<std::size_t>(k)); }
  [[nodiscard]] bool has(OpKind k) const { return find(k) != nullptr; }
  // The kinds with a kernel, in declaration order.
  [[nodiscard]] std::vector<OpKind> kinds() const {
    std::vector<OpKind> out;
    for (std::size_t i = 0; i < op_kind_count; ++i)
      if (m_kernels[i] != nullptr) out.push_back(op_kind_at(i));
    return out;
  }

 private:
  std::array<Kernel, op_kind_count> m_kernels{};
};

}  // namespace perfsim::ops
