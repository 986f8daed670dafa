#include "core/run/engine_step_message.hpp"

#include <cstring>
#include <stdexcept>

namespace perfsim {

namespace {

class Writer {
 public:
  void i64(int64_t v) { raw(&v, sizeof v); }
  void i64s(const std::vector<int64_t>& v) {
    i64(static_cast<int64_t>(v.size()));
    raw(v.data(), v.size() * sizeof(int64_t));
  }
  void i32s(const std::vector<int32_t>& v) {
    i64(static_cast<int64_t>(v.size()));
    raw(v.data(), v.size() * sizeof(int32_t));
  }
  void text(const std::string& s) {
    i64(static_cast<int64_t>(s.size()));
    raw(s.data(), s.size());
  }
  [[nodiscard]] std::string take() { return std::move(m_out); }

 private:
  void raw(const void* p, std::size_t n) { m_out.append(static_cast<const char*>(p), n); }
  std::string m_out;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : m_in(in) {}
  int64_t i64() {
    int64_t v = 0;
    raw(&v, sizeof v);
    return v;
  }
  std::vector<int64_t> i64s() {
    std::vector<int64_t> v(count(sizeof(int64_t)));
    raw(v.data(), v.size() * sizeof(int64_t));
    return v;
  }
  std::vector<int32_t> i32s() {
    std::vector<int32_t> v(count(sizeof(int32_t)));
    raw(v.data(), v.size() * sizeof(int32_t));
    return v;
  }
  std::string text() {
    std::string s(count(1), '\0');
    raw(s.data(), s.size());
    return s;
  }
  [[nodiscard]] bool done() const { return m_at == m_in.size(); }

 private:
  // A length that the bytes left can hold (a corrupt one must not allocate without bound).
  std::size_t count(std::size_t each) {
    const int64_t n = i64();
    if (n < 0 || static_cast<std::size_t>(n) > (m_in.size() - m_at) / each)
      throw std::runtime_error("engine step message: a length beyond the message");
    return static_cast<std::size_t>(n);
  }
  void raw(void* p, std::size_t n) {
    if (n > m_in.size() - m_at) throw std::runtime_error("engine step message: cut short");
    if (n > 0) std::memcpy(p, m_in.data() + m_at, n);
    m_at += n;
  }
  const std::string& m_in;
  std::size_t m_at = 0;
};

}  // namespace

std::string pack_step_message(const EngineStepMessage& m) {
  Writer w;
  w.i64(m.graph_key);
  w.i64s(m.shape.q_len);
  w.i64s(m.shape.kv_len);
  w.i64(m.shape.sampled);
  w.i64(m.shape.pool_blocks);
  w.i64(m.shape.kv_block);
  w.i64(m.shape.table_width);
  w.i64(static_cast<int64_t>(m.inputs.size()));
  for (const auto& [name, values] : m.inputs) {
    w.text(name);
    w.i32s(values);
  }
  return w.take();
}

EngineStepMessage unpack_step_message(const std::string& bytes) {
  Reader r(bytes);
  EngineStepMessage m;
  m.graph_key = r.i64();
  m.shape.q_len = r.i64s();
  m.shape.kv_len = r.i64s();
  m.shape.sampled = r.i64();
  m.shape.pool_blocks = r.i64();
  m.shape.kv_block = r.i64();
  m.shape.table_width = r.i64();
  const int64_t inputs = r.i64();
  if (inputs < 0 || inputs > 64) throw std::runtime_error("engine step message: a count of inputs out of range");
  for (int64_t i = 0; i < inputs; ++i) {
    std::string name = r.text();
    m.inputs.emplace_back(std::move(name), r.i32s());
  }
  if (!r.done()) throw std::runtime_error("engine step message: bytes left over");
  return m;
}

}  // namespace perfsim
