// The operands of one op as a kernel takes them. A backend stages an op's buffers (inputs, then
// outputs, in the order of the kind's line in core/graph/op_kind.hpp, each already in the
// storage the kernel reads); a view of op_io.hpp then names each one, reading them in that order
// through an OperandReader. Kernels take the view, never an index, and a view that reads fewer
// or more operands than the op has fails here, before any kernel runs.
#pragma once
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

#include "core/graph/graph.hpp"

namespace perfsim::ops {

class OperandReader {
 public:
  OperandReader(const Op& op, std::span<void* const> in, std::span<void* const> out)
      : m_op(op), m_in(in), m_out(out) {}

  // The next input or output, as elements of P.
  template <class P> [[nodiscard]] const P* in() { return static_cast<const P*>(next(m_in, m_next_in, "input")); }
  template <class P> [[nodiscard]] P* out() { return static_cast<P*>(next(m_out, m_next_out, "output")); }
  // An optional trailing operand: nullptr when the op has no more.
  template <class P> [[nodiscard]] const P* in_if_present() { return m_next_in < m_in.size() ? in<P>() : nullptr; }
  template <class P> [[nodiscard]] P* out_if_present() { return m_next_out < m_out.size() ? out<P>() : nullptr; }
  // An input the backend copied into the output that the kernel then updates in place
  // (kv_append's cache, an accumulating embedding_bwd's tables): read, not handed on.
  void in_place() { (void)next(m_in, m_next_in, "input"); }
  // Every remaining input is such an in-place one.
  void rest_in_place() { m_next_in = m_in.size(); }

  // Throws std::logic_error when operands are left unread.
  void finish() const {
    if (m_next_in != m_in.size() || m_next_out != m_out.size())
      throw std::logic_error(fmt::format("op '{}' ({}): its view read {} of {} inputs and {} of {} outputs", m_op.name,
                                         name_of(m_op.kind), m_next_in, m_in.size(), m_next_out, m_out.size()));
  }

 private:
  void* next(std::span<void* const> list, std::size_t& at, const char* what) const {
    if (at >= list.size())
      throw std::logic_error(fmt::format("op '{}' ({}): its view reads {} {} of {}", m_op.name, name_of(m_op.kind),
                                         what, at, list.size()));
    return list[at++];
  }

  const Op& m_op;
  std::span<void* const> m_in, m_out;
  std::size_t m_next_in = 0, m_next_out = 0;
};

// The view V of an op's staged operands (V::read names them in the table's order).
template <class V>
[[nodiscard]] V view(const Op& op, std::span<void* const> in, std::span<void* const> out) {
  OperandReader r(op, in, out);
  V v = V::read(r);
  r.finish();
  return v;
}

}  // namespace perfsim::ops
