// Config loader: the keys of a `postgres` step (see docs/steps/postgres.md).
#include <cctype>

#include "daemon/config/config_parts.hpp"

namespace fo::config::detail {
namespace {

constexpr std::size_t kMaxConninfo = 1024;
constexpr std::size_t kMaxConninfoPairs = 32;

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool host_ok(std::string_view list) {
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    const std::string one(list.substr(start, end - start));
    if (one.empty() || (one.front() != '/' && !is_ip(one))) return false;
    start = end + 1;
  }
  return true;
}

// libpq's key=value syntax (values may be single-quoted with backslash escapes). Returns ""
// or the problem. URIs are refused: their host part is harder to check and they invite
// embedded passwords.
std::string conninfo_problem(std::string_view text) {
  if (text.find("://") != std::string_view::npos)
    return "must use the key=value form (\"host=10.0.0.1 port=5432 ...\"), not a URI";
  std::size_t i = 0, pairs = 0;
  bool has_hostaddr = false;
  std::string host;
  auto space = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  for (space(); i < text.size(); space()) {
    if (++pairs > kMaxConninfoPairs) return "has more than 32 settings";
    const std::size_t key_start = i;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
      ++i;
    const std::string key(text.substr(key_start, i - key_start));
    space();
    if (key.empty() || i >= text.size() || text[i] != '=')
      return "is not a list of key=value settings";
    ++i;
    space();
    std::string value;
    if (i < text.size() && text[i] == '\'') {
      for (++i;; ++i) {
        if (i >= text.size()) return "has an unterminated quoted value";
        if (text[i] == '\\' && i + 1 < text.size()) {
          value += text[++i];
        } else if (text[i] == '\'') {
          ++i;
          break;
        } else {
          value += text[i];
        }
      }
    } else {
      while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])))
        value += text[i++];
    }
    if (key == "password" || key == "passfile")
      return "must not contain " + key + " (use password_file)";
    if (key == "host") host = value;
    if (key == "hostaddr") {
      has_hostaddr = true;
      if (!host_ok(value)) return "hostaddr " + quote(value) + " is not a list of IP addresses";
    }
  }
  if (!has_hostaddr && !host.empty() && !host_ok(host))
    return "host " + quote(host) +
           " must be IP addresses or socket directories (a name lookup would block the loop)";
  return "";
}

void parse_target_table(const TableReader& r, PostgresTarget& t) {
  r.reject_unknown_keys();
  const bool keys = r.has("host") || r.has("port") || r.has("dbname") || r.has("user");
  if (r.has("conninfo") && keys) {
    for (std::string_view key : {"host", "port", "dbname", "user"})
      if (r.has(key))
        r.error_at_key(key, r.path(key) + ": give either conninfo or host/port/dbname/user");
  } else if (!r.has("conninfo") && !r.has("host")) {
    r.sink().add(r.table().source(), "missing required key 'host' (or 'conninfo') " + r.label());
  }
  if (auto v = r.string("conninfo", kMaxConninfo)) {
    if (std::string problem = conninfo_problem(*v); !problem.empty())
      r.error_at_value("conninfo", r.path("conninfo") + ": " + problem);
    else if (trim_spaces(*v).empty())
      r.error_at_value("conninfo", r.path("conninfo") + ": must not be empty");
    else
      t.conninfo = *v;
  }
  read_pg_endpoint(r, t.host, t.port, t.dbname, t.user, t.password_file);
}

void parse_target(const TableReader& step, std::string_view key, PostgresTarget& t) {
  const toml::node* n = step.node(key);
  if (!n) return step.missing(key);
  if (n->is_string()) {
    if (auto v = step.string(key, kMaxConninfo)) {
      if (std::string problem = conninfo_problem(*v); !problem.empty())
        step.error_at_value(key, step.path(key) + ": " + problem);
      else if (trim_spaces(*v).empty())
        step.error_at_value(key, step.path(key) + ": must not be empty");
      else
        t.conninfo = *v;
    }
    t.configured = true;
    return;
  }
  const toml::table* table = n->as_table();
  if (!table) {
    step.error_at_value(key, step.path(key) + ": expected a conninfo string or a table like { " +
                                 "host = \"10.0.0.1\", port = 5432 }, got " +
                                 std::string(type_name(*n)));
    return;
  }
  TableReader r(step.sink(), *table, "in " + step.path(key), step.path(key) + ".",
                {"conninfo", "host", "port", "dbname", "user", "password_file"});
  parse_target_table(r, t);
  t.configured = true;
}

}  // namespace

std::vector<std::string_view> postgres_step_keys() {
  return {"action", "primary", "secondary", "fence", "max_lag", "connect_timeout"};
}

void parse_postgres_step(const TableReader& r, PostgresStep& out) {
  if (auto v = r.choice("action", {"promote"})) out.action = *v;
  parse_target(r, "primary", out.primary);
  parse_target(r, "secondary", out.secondary);
  if (auto v = r.choice("fence", {"read_only", "none"})) out.fence = *v;
  if (auto v = r.string("max_lag", 64)) {
    const std::string_view text = trim_spaces(*v);
    if (!text.empty() && text.back() == 'B') {
      std::optional<std::uint64_t> bytes = parse_size(text);
      if (!bytes || *bytes == 0) {
        r.error_at_value("max_lag", r.path("max_lag") + ": " + quote(*v) +
                                        " is not a size from 1B to 1048576GB (e.g. \"16MB\")");
      } else {
        out.max_lag_bytes = *bytes;
        out.max_lag_time = core::Millis(0);
        out.max_lag = std::string(text);
      }
    } else {
      std::optional<core::Millis> d = core::parse_duration(text);
      if (!d || d->count() < 1 || *d > std::chrono::hours(24)) {
        r.error_at_value("max_lag", r.path("max_lag") + ": " + quote(*v) +
                                        " must be a size like \"16MB\" or a duration from 1ms "
                                        "to 24h like \"10s\"");
      } else {
        out.max_lag_bytes = 0;
        out.max_lag_time = *d;
        out.max_lag = std::string(text);
      }
    }
  }
  if (auto v = r.duration("connect_timeout", core::Millis(100), std::chrono::seconds(60)))
    out.connect_timeout = *v;
}

}  // namespace fo::config::detail
