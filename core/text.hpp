// Small string helpers shared by catalogs and error messages.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace perfsim {

[[nodiscard]] std::string to_lower(std::string_view s);
// Levenshtein distance, used for "did you mean" suggestions.
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);
// The closest candidate (case-insensitive), or "" when nothing is reasonably close.
[[nodiscard]] std::string closest_match(std::string_view name, const std::vector<std::string>& candidates);
// " (did you mean 'x'?)" or "" — appended to unknown-name errors.
[[nodiscard]] std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);
// One CSV field, quoted (RFC 4180) when it holds a comma, a quote or a line break.
[[nodiscard]] std::string csv_quote(std::string_view s);
// One CSV line of `cells`, each csv_quote'd, ending in a newline.
[[nodiscard]] std::string csv_join(const std::vector<std::string>& cells);
// The fields of one CSV line as csv_quote writes them (a quoted field may hold commas; "" in it
// is one quote); nullopt when a quoted field does not end on the line.
[[nodiscard]] std::optional<std::vector<std::string>> split_csv_line(std::string_view line);
// A whole file's bytes; nullopt when it cannot be opened.
[[nodiscard]] std::optional<std::string> read_text_file(const std::string& path);

}  // namespace perfsim
