// A small table that renders as aligned plain text or as a markdown table. Shared by the
// report printers and `perfsim list`; widths count UTF-8 code points so "µs" and "—" align.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace perfsim {

enum class Align { left, right };

class TextTable {
 public:
  // A column: its header and alignment (numbers right, names left).
  void add_column(std::string header, Align align = Align::right);
  // One row; missing trailing cells print empty.
  void add_row(std::vector<std::string> cells);
  [[nodiscard]] bool empty() const { return m_rows.empty(); }
  [[nodiscard]] std::size_t columns() const { return m_headers.size(); }

  // Columns separated by two spaces, a dashed rule under the header, `indent` spaces before
  // each line, trailing blanks trimmed.
  [[nodiscard]] std::string to_text(int indent = 0) const;
  // GitHub-flavoured markdown; '|' in cells is escaped.
  [[nodiscard]] std::string to_markdown() const;

 private:
  std::vector<std::string> m_headers;
  std::vector<Align> m_align;
  std::vector<std::vector<std::string>> m_rows;
};

// Display width of UTF-8 text (code points; every one counted as one column).
[[nodiscard]] std::size_t display_width(std::string_view s);

// "key  value" lines with the keys padded to one width.
[[nodiscard]] std::string format_key_values(const std::vector<std::pair<std::string, std::string>>& kv,
                                            int indent = 0);

}  // namespace perfsim
