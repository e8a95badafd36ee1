// Section parsers of the config loader (internal); each reports into the shared ErrorSink.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/config/config.hpp"
#include "daemon/config/toml_reader.hpp"

namespace fo::config::detail {

inline constexpr std::size_t kMaxLocations = 64;
inline constexpr std::size_t kMaxGroups = 256;
inline constexpr std::size_t kMaxProbesPerSite = 32;
inline constexpr std::size_t kMaxStepsPerPhase = 32;

// `interval` is the group's interval when it was valid; interval-dependent checks are skipped
// otherwise so that one bad value does not cascade into several errors.
Site parse_site(const TableReader& group, const std::string& site_key,
                std::optional<core::Millis> interval);
std::vector<Step> parse_steps(const TableReader& group, core::Phase phase);
// A probe table (also the `probe` of a check step). `interval` bounds its timeout when given.
Probe parse_probe(ErrorSink& sink, const toml::table& table, const std::string& probe_path,
                  std::size_t index, std::optional<core::Millis> interval);
core::Policy parse_policy(const TableReader& group, std::optional<core::Millis> interval,
                          std::size_t group_locations);

// Value helpers shared by the loader files (config_site.cpp). Each reports through the reader
// and returns an empty/nullopt value when the value is invalid.
std::optional<std::string> check_kind(const TableReader& r,
                                      const std::vector<std::string_view>& supported,
                                      std::string_view what);
std::string read_name(const TableReader& r, std::string_view kind, std::size_t index);
bool is_ip(const std::string& s);
// "host:port" / "[v6]:port" / "host" (default_port); host must be an IP literal. "" or a problem.
std::string parse_endpoint(std::string_view text, int default_port, Endpoint& out);
// A DNS name problem ("" when valid).
std::string dns_name_problem(std::string_view name);
std::string url_problem(std::string_view url);
std::string header_name_problem(std::string_view name);
std::string env_name_problem(std::string_view name);
// "16MB", "1GiB", "123" (bytes).
std::optional<std::uint64_t> parse_size(std::string_view text);
// A non-empty path string.
void read_path(const TableReader& r, std::string_view key, std::string& out);
// host (IP literal or socket directory), port, dbname, user, password_file (absolute) of a
// PostgreSQL connection, shared by the postgres probe and the postgres step.
void read_pg_endpoint(const TableReader& r, std::string& host, int& port, std::string& dbname,
                      std::string& user, std::string& password_file);
// Absolute argv[0], no NUL; nullopt (reported) when missing or invalid.
std::optional<std::vector<std::string>> parse_argv(const TableReader& r);

// Items of a site or a phase share one name space; reports the later duplicate.
template <typename Item>
void check_unique(const TableReader& item_reader, const std::vector<Item>& earlier,
                  const Item& item, std::string_view what) {
  for (const Item& other : earlier) {
    if (!item.name.empty() && other.name == item.name) {
      std::string message = "duplicate " + std::string(what) + " name " + quote(item.name) +
                            " (first defined at line " + std::to_string(other.pos.line) + ")";
      if (item_reader.has("name"))
        item_reader.error_at_value("name", message);
      else
        item_reader.sink().add(item_reader.table().source(), message);
      return;
    }
  }
}

// Step kinds: the keys each kind adds to the common step keys, and its parser. One file per
// kind (step_<kind>.cpp). The parser reads the kind's keys from `r` into `out`.
std::vector<std::string_view> dns_step_keys();
void parse_dns_step(const TableReader& r, DnsStep& out);
std::vector<std::string_view> postgres_step_keys();
void parse_postgres_step(const TableReader& r, PostgresStep& out);
std::vector<std::string_view> systemd_step_keys();
void parse_systemd_step(const TableReader& r, SystemdStep& out);
std::vector<std::string_view> webhook_step_keys();
void parse_webhook_step(const TableReader& r, WebhookStep& out);

}  // namespace fo::config::detail
