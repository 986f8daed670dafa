// The trace and lengths files of serve{} (declared in traffic.hpp): JSONL or CSV traces of
// arrival times and token counts, and lists of token counts, every error naming file:line.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "core/errors.hpp"
#include "core/files.hpp"
#include "core/serve/traffic.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {

using json = nlohmann::json;

// The largest whole number a double holds exactly: token counts beyond it are refused.
constexpr int64_t kNoLimit = int64_t{1} << 53;
// ---------------------------------------------------------------------------------------------
// Files

// Regular files only (a FIFO would block, /dev/zero never end), of bounded size.
std::string read_input(const std::string& path, const char* what) {
  return read_regular_file(path, fmt::format("cannot read {}", what));
}

// The file's lines without their line ends (and without a leading UTF-8 byte order mark).
std::vector<std::string_view> lines_of(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  const std::size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const std::size_t last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

[[noreturn]] void fail_at(const std::string& path, std::size_t line, const std::string& what) {
  throw ConfigError(fmt::format("{}:{}: {}", path, line, what));
}

// A whole number held exactly by a double (token counts, group numbers), or nullopt.
std::optional<int64_t> whole_number(double v) {
  if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > static_cast<double>(kNoLimit)) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> parse_number(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// A field a trace row may have: its name and the other name accepted for it.
struct Column {
  const char* name;
  const char* alias;  // nullptr: none
};
constexpr Column kArrival{"arrival", "timestamp"};
constexpr Column kPrompt{"prompt", "input_tokens"};
constexpr Column kOutput{"output", "output_tokens"};
constexpr Column kPrefixGroup{"prefix_group", nullptr};
constexpr Column kPrefixTokens{"prefix_tokens", nullptr};

const char* kTraceExample = R"(like {"arrival": 0.5, "prompt": 512, "output": 128})";

std::string names_of(const Column& c) {
  return c.alias ? fmt::format("\"{}\" (or \"{}\")", c.name, c.alias) : fmt::format("\"{}\"", c.name);
}

// One field of a trace row as read: absent, or present as a number or as text that is not one.
struct Field {
  std::string name;               // the key or column the file used
  bool present = false;
  std::optional<double> number;
  std::string text;               // what was there, for the error
};

// Reads one row's fields into a request, checking each; `line` and `path` name it in errors.
class RowReader {
 public:
  RowReader(const std::string& path, std::size_t line) : path_(path), line_(line) {}

  double seconds(const Field& f, const Column& c) {
    const double v = required(f, c);
    if (!(v >= 0 && std::isfinite(v)))
      fail_at(path_, line_, fmt::format("\"{}\" must be >= 0 seconds (got {})", f.name, f.text));
    return v;
  }

  int64_t tokens(const Field& f, const Column& c) {
    const auto n = whole_number(required(f, c));
    if (!n || *n < 1)
      fail_at(path_, line_, fmt::format("\"{}\" must be a whole number of tokens >= 1 (got {})", f.name, f.text));
    return *n;
  }

  // An optional whole number >= 0; nullopt when absent.
  std::optional<int64_t> optional_count(const Field& f, const char* what) {
    if (!f.present) return std::nullopt;
    const auto n = f.number ? whole_number(*f.number) : std::nullopt;
    if (!n || *n < 0)
      fail_at(path_, line_, fmt::format("\"{}\" must be a whole number >= 0 {} (got {}); leave it out for none",
                                        f.name, what, f.text));
    return n;
  }

  [[noreturn]] void fail(const std::string& what) const { fail_at(path_, line_, what); }

 private:
  double required(const Field& f, const Column& c) {
    if (!f.present) fail_at(path_, line_, fmt::format("missing {}; each request needs arrival, prompt and output", names_of(c)));
    if (!f.number) fail_at(path_, line_, fmt::format("\"{}\" must be a number (got {})", f.name, f.text));
    return *f.number;
  }

  const std::string& path_;
  std::size_t line_;
};

struct RowFields {
  Field arrival, prompt, output, prefix_group, prefix_tokens;
};

Request to_request(const std::string& path, std::size_t line, const RowFields& f) {
  RowReader row(path, line);
  Request r;
  r.arrival = row.seconds(f.arrival, kArrival);
  r.prompt = row.tokens(f.prompt, kPrompt);
  r.output = row.tokens(f.output, kOutput);
  const auto group = row.optional_count(f.prefix_group, "(the shared prefix's number)");
  const auto prefix = row.optional_count(f.prefix_tokens, "(tokens of the shared prefix)");
  if (group && !prefix) row.fail("\"prefix_group\" needs \"prefix_tokens\" (how many prompt tokens the prefix is)");
  if (prefix && !group) row.fail("\"prefix_tokens\" needs \"prefix_group\" (which shared prefix they are)");
  if (group) {
    if (*prefix > r.prompt)
      row.fail(fmt::format("\"prefix_tokens\" = {} is more than the prompt's {} tokens", *prefix, r.prompt));
    r.prefix_group = *group;
    r.prefix_tokens = *prefix;
  }
  return r;
}

Field json_field(const json& object, const Column& c) {
  Field f;
  f.name = c.name;
  auto it = object.find(c.name);
  if (it == object.end() && c.alias) {
    it = object.find(c.alias);
    if (it != object.end()) f.name = c.alias;
  }
  if (it == object.end() || it->is_null()) return f;  // null reads as absent
  f.present = true;
  f.text = it->dump();
  if (f.text.size() > 40) f.text = f.text.substr(0, 37) + "...";
  if (it->is_number()) f.number = it->get<double>();
  return f;
}

// nlohmann's parse error without its "[json.exception...] parse error at line 1, column N: "
// preamble (the line is the file's, given separately).
std::string json_error_detail(const json::parse_error& e) {
  const std::string what = e.what();
  const std::size_t column = what.find("column ");
  const std::size_t colon = column == std::string::npos ? std::string::npos : what.find(": ", column);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

void read_jsonl(const std::string& path, const std::vector<std::string_view>& lines, std::vector<Request>& out,
                std::vector<std::size_t>& line_numbers) {
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view text = trim(lines[i]);
    if (text.empty()) continue;
    const std::size_t line = i + 1;
    json object;
    try {
      object = json::parse(text);
    } catch (const json::parse_error& e) {
      fail_at(path, line, fmt::format("invalid JSON at column {}: {}; write one object per line, {}", e.byte,
                                      json_error_detail(e), kTraceExample));
    } catch (const json::exception&) {
      // Parsed, but a number beyond what a double holds (1e999).
      fail_at(path, line, fmt::format("a number out of range; write one object per line, {}", kTraceExample));
    }
    if (!object.is_object())
      fail_at(path, line, fmt::format("expected a JSON object {}, got {}", kTraceExample, object.type_name()));
    RowFields f{json_field(object, kArrival), json_field(object, kPrompt), json_field(object, kOutput),
                json_field(object, kPrefixGroup), json_field(object, kPrefixTokens)};
    out.push_back(to_request(path, line, f));
    line_numbers.push_back(line);
  }
}

void read_csv(const std::string& path, const std::vector<std::string_view>& lines, std::vector<Request>& out,
              std::vector<std::size_t>& line_numbers) {
  std::size_t i = 0;
  while (i < lines.size() && trim(lines[i]).empty()) ++i;
  if (i == lines.size()) return;
  const std::size_t header_line = i + 1;
  const auto header = split_csv_line(lines[i]);
  if (!header) fail_at(path, header_line, "the header has a quoted name that does not end on its line");
  auto column_of = [&](const Column& c, std::string& used) -> int {
    for (const char* name : {c.name, c.alias}) {
      if (!name) continue;
      for (std::size_t k = 0; k < header->size(); ++k)
        if (to_lower(trim((*header)[k])) == name) {
          used = name;
          return static_cast<int>(k);
        }
    }
    used = c.name;
    return -1;
  };
  const Column* columns[] = {&kArrival, &kPrompt, &kOutput, &kPrefixGroup, &kPrefixTokens};
  int index[5];
  std::string used[5];
  for (int c = 0; c < 5; ++c) {
    index[c] = column_of(*columns[c], used[c]);
    if (index[c] < 0 && c < 3)
      fail_at(path, header_line,
              fmt::format("the header has no {} column; a CSV trace starts with a header such as "
                          "arrival,prompt,output (optional: prefix_group,prefix_tokens)",
                          names_of(*columns[c])));
  }
  for (++i; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const std::size_t line = i + 1;
    const auto cells = split_csv_line(lines[i]);
    if (!cells) fail_at(path, line, "a quoted field does not end on its line");
    if (cells->size() != header->size())
      fail_at(path, line, fmt::format("{} fields where the header (line {}) names {}; write one value per column",
                                      cells->size(), header_line, header->size()));
    Field fields[5];
    for (int c = 0; c < 5; ++c) {
      fields[c].name = used[c];
      if (index[c] < 0) continue;
      const std::string_view cell = trim((*cells)[static_cast<std::size_t>(index[c])]);
      if (cell.empty()) continue;  // an empty cell reads as absent
      fields[c].present = true;
      fields[c].text = fmt::format("'{}'", cell);
      fields[c].number = parse_number(cell);
    }
    out.push_back(to_request(path, line, RowFields{fields[0], fields[1], fields[2], fields[3], fields[4]}));
    line_numbers.push_back(line);
  }
}

}  // namespace

std::vector<Request> read_trace(const std::string& path) {
  const std::string text = read_input(path, "trace");
  const auto lines = lines_of(text);
  // JSONL when the first non-blank line opens an object; anything else is read as CSV.
  const auto first = std::find_if(lines.begin(), lines.end(), [](std::string_view l) { return !trim(l).empty(); });
  const bool jsonl = first != lines.end() && trim(*first).front() == '{';

  std::vector<Request> requests;
  std::vector<std::size_t> line_numbers;
  if (jsonl) read_jsonl(path, lines, requests, line_numbers);
  else read_csv(path, lines, requests, line_numbers);
  if (requests.empty())
    throw ConfigError(fmt::format("{}: the trace holds no requests; write one per line as JSON ({}) or as CSV "
                                  "under an arrival,prompt,output header",
                                  path, kTraceExample));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    requests[i].id = static_cast<int64_t>(i);
    if (i > 0 && requests[i].arrival < requests[i - 1].arrival)
      fail_at(path, line_numbers[i],
              fmt::format("arrival {} s is before the previous request's {} s; sort the trace by arrival time",
                          requests[i].arrival, requests[i - 1].arrival));
  }
  return requests;
}

std::vector<int64_t> read_lengths(const std::string& path) {
  const std::string text = read_input(path, "lengths file");
  const auto lines = lines_of(text);
  std::vector<int64_t> lengths;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = trim(lines[i]);
    if (line.empty() || line.front() == '#') continue;
    int64_t tokens = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), tokens);
    if (ec != std::errc() || end != line.data() + line.size())
      fail_at(path, i + 1, fmt::format("expected one whole number of tokens per line (got '{}')", line));
    if (tokens < 1) fail_at(path, i + 1, fmt::format("a token count must be >= 1 (got {})", tokens));
    lengths.push_back(tokens);
  }
  if (lengths.empty())
    throw ConfigError(fmt::format("{}: no lengths; write one positive token count per line", path));
  return lengths;
}

}  // namespace perfsim
