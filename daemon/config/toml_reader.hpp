// Position-aware, typed access to toml++ tables for the config loader (internal).
// Every problem becomes a ConfigError at the source position of the key or value involved,
// so the loader can collect all errors of a file instead of stopping at the first one.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/config/config.hpp"
#include "daemon/core/types.hpp"

namespace fo::config::detail {

inline constexpr std::size_t kMaxReportedErrors = 50;

// Collects errors with their positions; take() sorts them by position and applies the cap.
class ErrorSink {
 public:
  explicit ErrorSink(std::string file) : file_(std::move(file)) {}

  void add(const toml::source_region& where, std::string message);
  void add(const SourcePos& where, std::string message);
  SourcePos pos(const toml::source_region& where) const;
  SourcePos file_start() const { return SourcePos{file_, 1, 1}; }
  bool empty() const { return errors_.empty() && dropped_ == 0; }
  std::vector<ConfigError> take();

 private:
  std::string file_;
  std::vector<ConfigError> errors_;
  std::size_t dropped_ = 0;  // beyond the memory cap; only counted
};

// Renders a user-supplied string for a message: quoted, control characters escaped and long
// values shortened, so one error always stays on one line.
std::string quote(std::string_view s);
std::string format_number(double v);
// Like core::format_duration, but never rounds: 1500ms stays "1500ms", not "1s".
std::string format_exact(core::Millis d);
std::string_view type_name(const toml::node& n);
// Closest candidate within edit distance 2, or empty.
std::string_view closest(std::string_view word, const std::vector<std::string_view>& candidates);
// [A-Za-z0-9_.-]{1,64}
bool valid_name(std::string_view s);

// One TOML table as seen by the loader. `label` names the table in unknown-key messages
// ("[group.policy]"), `prefix` names its keys in value messages ("policy.").
class TableReader {
 public:
  TableReader(ErrorSink& sink, const toml::table& table, std::string label, std::string prefix,
              std::vector<std::string_view> known);

  // Reports every key that is not in the known list, with a suggestion when one is close.
  void reject_unknown_keys() const;

  ErrorSink& sink() const { return sink_; }
  const toml::table& table() const { return table_; }
  const std::string& label() const { return label_; }
  std::string path(std::string_view key) const { return prefix_ + std::string(key); }
  const toml::node* node(std::string_view key) const { return table_.get(key); }
  bool has(std::string_view key) const { return node(key) != nullptr; }
  // Where the key is written; the table itself if the key is absent.
  const toml::source_region& key_region(std::string_view key) const;
  const toml::source_region& value_region(std::string_view key) const;

  void error_at_key(std::string_view key, const std::string& message) const;
  void error_at_value(std::string_view key, const std::string& message) const;
  void missing(std::string_view key) const;

  // Each getter returns nullopt when the key is absent or invalid; invalid values are reported.
  std::optional<std::string> string(std::string_view key, std::size_t max_len) const;
  std::optional<std::string> choice(std::string_view key,
                                    std::initializer_list<std::string_view> allowed) const;
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t lo, std::int64_t hi) const;
  // Integers are accepted where numbers are expected. lo_open excludes lo itself.
  std::optional<double> number(std::string_view key, double lo, double hi,
                               bool lo_open = false) const;
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<core::Millis> duration(std::string_view key, core::Millis lo,
                                       core::Millis hi) const;
  // Table of string -> string. Keys are checked with key_ok (returns an error text or "").
  std::optional<std::map<std::string, std::string>> string_map(
      std::string_view key, std::size_t max_entries, std::size_t max_value_len,
      std::string (*key_ok)(std::string_view)) const;
  const toml::table* subtable(std::string_view key) const;
  // An array whose elements must all be tables ([[x]] or [ {..}, {..} ]); nullptr if invalid.
  const toml::array* table_array(std::string_view key, std::size_t max_len) const;

 private:
  void type_error(std::string_view key, std::string_view expected) const;

  ErrorSink& sink_;
  const toml::table& table_;
  std::string label_;
  std::string prefix_;
  std::vector<std::string_view> known_;
};

}  // namespace fo::config::detail
