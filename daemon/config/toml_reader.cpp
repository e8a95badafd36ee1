// Typed table access and error collection for the config loader.
#include "daemon/config/toml_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace fo::config::detail {
namespace {

// Far beyond what take() reports; only bounds memory on pathological input.
constexpr std::size_t kMaxCollectedErrors = 10000;

std::string describe_range(core::Millis lo, core::Millis hi) {
  return format_exact(lo) + ".." + format_exact(hi);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

SourcePos ErrorSink::pos(const toml::source_region& where) const {
  int line = static_cast<int>(where.begin.line);
  int column = static_cast<int>(where.begin.column);
  // Nodes without a recorded position (never expected from the parser) point at the file start.
  if (line <= 0) line = 1;
  if (column <= 0) column = 1;
  return SourcePos{file_, line, column};
}

void ErrorSink::add(const toml::source_region& where, std::string message) {
  add(pos(where), std::move(message));
}

void ErrorSink::add(const SourcePos& where, std::string message) {
  if (errors_.size() >= kMaxCollectedErrors) {
    ++dropped_;
    return;
  }
  errors_.push_back(ConfigError{where, std::move(message)});
}

std::vector<ConfigError> ErrorSink::take() {
  std::stable_sort(errors_.begin(), errors_.end(), [](const ConfigError& a, const ConfigError& b) {
    if (a.pos.line != b.pos.line) return a.pos.line < b.pos.line;
    return a.pos.column < b.pos.column;
  });
  std::size_t total = errors_.size() + dropped_;
  if (total > kMaxReportedErrors) {
    errors_.resize(kMaxReportedErrors - 1);
    SourcePos at = errors_.back().pos;
    errors_.push_back(ConfigError{
        at, "too many errors (" + std::to_string(total) + " in total); the rest are not shown"});
  }
  dropped_ = 0;
  return std::move(errors_);
}

std::string quote(std::string_view s) {
  constexpr std::size_t kMaxShown = 80;
  std::string out = "'";
  std::size_t shown = 0;
  for (char c : s) {
    if (shown == kMaxShown) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
    ++shown;
  }
  out += '\'';
  return out;
}

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "?";
  return std::string(buf, end);
}

std::string format_exact(core::Millis d) {
  if (d.count() >= 1000 && d.count() % 1000 != 0) return std::to_string(d.count()) + "ms";
  return core::format_duration(d);
}

std::string_view type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::string_view closest(std::string_view word, const std::vector<std::string_view>& candidates) {
  // Edit distance is quadratic; a key this long is not a typo of a known one anyway.
  if (word.size() > 64) return {};
  std::string_view best;
  std::size_t best_distance = 3;
  for (std::string_view c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

TableReader::TableReader(ErrorSink& sink, const toml::table& table, std::string label,
                         std::string prefix, std::vector<std::string_view> known)
    : sink_(sink),
      table_(table),
      label_(std::move(label)),
      prefix_(std::move(prefix)),
      known_(std::move(known)) {}

void TableReader::reject_unknown_keys() const {
  for (auto&& [key, value] : table_) {
    (void)value;
    std::string_view k = key.str();
    if (std::find(known_.begin(), known_.end(), k) != known_.end()) continue;
    std::string message = "unknown key " + quote(k) + " " + label_;
    if (std::string_view hint = closest(k, known_); !hint.empty())
      message += " (did you mean '" + std::string(hint) + "'?)";
    sink_.add(key.source(), std::move(message));
  }
}

const toml::source_region& TableReader::key_region(std::string_view key) const {
  auto it = table_.find(key);
  return it == table_.end() ? table_.source() : it->first.source();
}

const toml::source_region& TableReader::value_region(std::string_view key) const {
  const toml::node* n = node(key);
  return n ? n->source() : table_.source();
}

void TableReader::error_at_key(std::string_view key, const std::string& message) const {
  sink_.add(key_region(key), message);
}

void TableReader::error_at_value(std::string_view key, const std::string& message) const {
  sink_.add(value_region(key), message);
}

void TableReader::missing(std::string_view key) const {
  sink_.add(table_.source(), "missing required key '" + std::string(key) + "' " + label_);
}

void TableReader::type_error(std::string_view key, std::string_view expected) const {
  error_at_value(key, path(key) + ": expected " + std::string(expected) + ", got " +
                          std::string(type_name(*node(key))));
}

std::optional<std::string> TableReader::string(std::string_view key, std::size_t max_len) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  const auto* s = n->as_string();
  if (!s) {
    type_error(key, "a string");
    return std::nullopt;
  }
  const std::string& v = s->get();
  if (v.size() > max_len) {
    error_at_value(key, path(key) + ": too long (" + std::to_string(v.size()) + " bytes, max " +
                            std::to_string(max_len) + ")");
    return std::nullopt;
  }
  if (v.find('\0') != std::string::npos) {
    error_at_value(key, path(key) + ": must not contain NUL characters");
    return std::nullopt;
  }
  return v;
}

std::optional<std::string> TableReader::choice(
    std::string_view key, std::initializer_list<std::string_view> allowed) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  std::string expected;
  for (std::string_view a : allowed)
    expected += (expected.empty() ? "\"" : ", \"") + std::string(a) + "\"";
  if (!n->is_string()) {
    type_error(key, "one of " + expected);
    return std::nullopt;
  }
  const std::string& v = n->as_string()->get();
  if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
    error_at_value(
        key, path(key) + ": invalid value " + quote(v) + " (expected one of " + expected + ")");
    return std::nullopt;
  }
  return v;
}

std::optional<std::int64_t> TableReader::integer(std::string_view key, std::int64_t lo,
                                                 std::int64_t hi) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  const auto* i = n->as_integer();
  if (!i) {
    type_error(key, "an integer");
    return std::nullopt;
  }
  std::int64_t v = i->get();
  if (v < lo || v > hi) {
    error_at_value(key, path(key) + ": " + std::to_string(v) + " is out of range (" +
                            std::to_string(lo) + ".." + std::to_string(hi) + ")");
    return std::nullopt;
  }
  return v;
}

std::optional<double> TableReader::number(std::string_view key, double lo, double hi,
                                          bool lo_open) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  double v;
  if (const auto* f = n->as_floating_point()) {
    v = f->get();
  } else if (const auto* i = n->as_integer()) {
    v = static_cast<double>(i->get());
  } else {
    type_error(key, "a number");
    return std::nullopt;
  }
  bool above_lo = lo_open ? v > lo : v >= lo;
  if (!(above_lo && v <= hi)) {  // written so that NaN fails too
    std::string range =
        lo_open ? "greater than " + format_number(lo) + " and at most " + format_number(hi)
                : format_number(lo) + ".." + format_number(hi);
    error_at_value(key, path(key) + ": " + format_number(v) + " is out of range (" + range + ")");
    return std::nullopt;
  }
  return v;
}

std::optional<bool> TableReader::boolean(std::string_view key) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  const auto* b = n->as_boolean();
  if (!b) {
    type_error(key, "a boolean (true or false)");
    return std::nullopt;
  }
  return b->get();
}

std::optional<core::Millis> TableReader::duration(std::string_view key, core::Millis lo,
                                                  core::Millis hi) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  const auto* s = n->as_string();
  if (!s) {
    type_error(key, "a duration string like \"10s\"");
    return std::nullopt;
  }
  std::optional<core::Millis> d = core::parse_duration(s->get());
  if (!d) {
    error_at_value(key, path(key) + ": invalid duration " + quote(s->get()) +
                            " (expected e.g. \"250ms\", \"10s\", \"45m\", \"1h30m\")");
    return std::nullopt;
  }
  if (*d < lo || *d > hi) {
    error_at_value(key, path(key) + ": " + format_exact(*d) + " is out of range (" +
                            describe_range(lo, hi) + ")");
    return std::nullopt;
  }
  return d;
}

std::optional<std::map<std::string, std::string>> TableReader::string_map(
    std::string_view key, std::size_t max_entries, std::size_t max_value_len,
    std::string (*key_ok)(std::string_view)) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  const toml::table* t = n->as_table();
  if (!t) {
    type_error(key, "a table of strings");
    return std::nullopt;
  }
  if (t->size() > max_entries) {
    error_at_value(key, path(key) + ": too many entries (" + std::to_string(t->size()) + ", max " +
                            std::to_string(max_entries) + ")");
    return std::nullopt;
  }
  std::map<std::string, std::string> out;
  bool ok = true;
  for (auto&& [k, v] : *t) {
    std::string name = path(key) + "." + std::string(k.str());
    if (std::string problem = key_ok(k.str()); !problem.empty()) {
      sink_.add(k.source(), path(key) + ": " + quote(k.str()) + " " + problem);
      ok = false;
      continue;
    }
    const auto* s = v.as_string();
    if (!s) {
      sink_.add(v.source(), name + ": expected a string, got " + std::string(type_name(v)));
      ok = false;
      continue;
    }
    const std::string& value = s->get();
    if (value.size() > max_value_len) {
      sink_.add(v.source(), name + ": too long (" + std::to_string(value.size()) + " bytes, max " +
                                std::to_string(max_value_len) + ")");
      ok = false;
      continue;
    }
    if (value.find_first_of(std::string_view("\0\r\n", 3)) != std::string::npos) {
      sink_.add(v.source(), name + ": must not contain NUL, CR or LF characters");
      ok = false;
      continue;
    }
    out.emplace(std::string(k.str()), value);
  }
  if (!ok) return std::nullopt;
  return out;
}

const toml::table* TableReader::subtable(std::string_view key) const {
  const toml::node* n = node(key);
  if (!n) return nullptr;
  const toml::table* t = n->as_table();
  if (!t) type_error(key, "a table ([" + prefix_ + std::string(key) + "])");
  return t;
}

const toml::array* TableReader::table_array(std::string_view key, std::size_t max_len) const {
  const toml::node* n = node(key);
  if (!n) return nullptr;
  const toml::array* a = n->as_array();
  if (!a) {
    type_error(key, "an array of tables ([[" + prefix_ + std::string(key) + "]])");
    return nullptr;
  }
  if (a->size() > max_len) {
    error_at_value(key, path(key) + ": too many entries (" + std::to_string(a->size()) + ", max " +
                            std::to_string(max_len) + ")");
    return nullptr;
  }
  bool ok = true;
  for (const toml::node& e : *a) {
    if (!e.is_table()) {
      sink_.add(e.source(), path(key) + ": expected a table, got " + std::string(type_name(e)));
      ok = false;
    }
  }
  return ok ? a : nullptr;
}

}  // namespace fo::config::detail
