// Aligned text and markdown rendering of TextTable, and key/value header blocks.
#include "core/report/text_table.hpp"

#include <algorithm>

namespace perfsim {

std::size_t display_width(std::string_view s) {
  std::size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;  // count lead bytes only: one per code point
  return w;
}

void TextTable::add_column(std::string header, Align align) {
  m_headers.push_back(std::move(header));
  m_align.push_back(align);
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(m_headers.size());
  m_rows.push_back(std::move(cells));
}

namespace {

std::string pad(const std::string& s, std::size_t width, Align a) {
  const std::size_t w = display_width(s);
  if (w >= width) return s;
  const std::string fill(width - w, ' ');
  return a == Align::left ? s + fill : fill + s;
}

void trim_right(std::string& s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
}

}  // namespace

std::string TextTable::to_text(int indent) const {
  const std::size_t n = m_headers.size();
  std::vector<std::size_t> width(n, 0);
  for (std::size_t c = 0; c < n; ++c) width[c] = display_width(m_headers[c]);
  for (const auto& row : m_rows)
    for (std::size_t c = 0; c < n; ++c) width[c] = std::max(width[c], display_width(row[c]));

  const std::string lead(static_cast<std::size_t>(std::max(indent, 0)), ' ');
  auto line = [&](auto cell_of) {
    std::string out = lead;
    for (std::size_t c = 0; c < n; ++c) {
      if (c) out += "  ";
      out += pad(cell_of(c), width[c], m_align[c]);
    }
    trim_right(out);
    return out + "\n";
  };
  std::string out = line([&](std::size_t c) { return m_headers[c]; });
  out += line([&](std::size_t c) { return std::string(width[c], '-'); });
  for (const auto& row : m_rows) out += line([&](std::size_t c) { return row[c]; });
  return out;
}

std::string TextTable::to_markdown() const {
  auto escape = [](const std::string& s) {
    std::string out;
    for (char ch : s) {
      if (ch == '|') out += '\\';
      out += ch;
    }
    return out;
  };
  std::string out = "|";
  for (const auto& h : m_headers) {
    out += ' ';
    out += escape(h);
    out += " |";
  }
  out += "\n|";
  for (Align a : m_align) out += a == Align::right ? " ---: |" : " :--- |";
  out += "\n";
  for (const auto& row : m_rows) {
    out += "|";
    for (const auto& cell : row) {
      out += ' ';
      out += escape(cell);
      out += " |";
    }
    out += "\n";
  }
  return out;
}

std::string format_key_values(const std::vector<std::pair<std::string, std::string>>& kv,
                              int indent) {
  std::size_t key_width = 0;
  for (const auto& [k, v] : kv) key_width = std::max(key_width, display_width(k));
  const std::string lead(static_cast<std::size_t>(std::max(indent, 0)), ' ');
  std::string out;
  for (const auto& [k, v] : kv) {
    std::string line = lead + pad(k, key_width, Align::left) + "  " + v;
    trim_right(line);
    out += line + "\n";
  }
  return out;
}

}  // namespace perfsim
