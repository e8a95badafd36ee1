// Config loader: the probes of a site ([group.primary] / [group.secondary]) and the steps of a
// phase ([[group.warm]], [[group.failover]], [[group.failback]], [[group.cool]]).
#include <algorithm>
#include <charconv>

#include "daemon/config/config_parts.hpp"

namespace fo::config::detail {
namespace {

constexpr std::size_t kMaxUrlLen = 2048;
constexpr std::size_t kMaxBodyContains = 1024;
constexpr std::size_t kMaxHeaders = 32;
constexpr std::size_t kMaxHeaderValue = 4096;
constexpr std::size_t kMaxStatusRanges = 32;
constexpr std::size_t kMaxArgs = 64;
constexpr std::size_t kMaxArgLen = 4096;
constexpr std::size_t kMaxEnv = 64;
constexpr std::size_t kMaxEnvValue = 4096;
constexpr std::size_t kMaxPathLen = 4096;

std::string name_problem(std::string_view field, std::string_view value) {
  return std::string(field) + ": " + quote(value) +
         " must be 1..64 characters of A-Z a-z 0-9 _ . -";
}

bool is_tchar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string header_name_problem(std::string_view name) {
  if (name.empty() || name.size() > 256 || !std::all_of(name.begin(), name.end(), is_tchar))
    return "is not a valid HTTP header name";
  return "";
}

std::string env_name_problem(std::string_view name) {
  bool ok = !name.empty() && !(name[0] >= '0' && name[0] <= '9') &&
            std::all_of(name.begin(), name.end(), [](char c) {
              return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
            });
  if (!ok) return "is not a valid environment variable name ([A-Z_][A-Z0-9_]*)";
  if (name.substr(0, 9) == "FAILOVER_")
    return "is reserved: names starting with FAILOVER_ are set by failoverd";
  return "";
}

std::string url_problem(std::string_view url) {
  std::string_view rest;
  if (url.substr(0, 7) == "http://")
    rest = url.substr(7);
  else if (url.substr(0, 8) == "https://")
    rest = url.substr(8);
  else
    return "must start with http:// or https://";
  if (rest.empty() || rest[0] == '/' || rest[0] == '?' || rest[0] == '#') return "has no host";
  for (char c : url)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return "must not contain spaces or control characters";
  return "";
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int> parse_status_code(std::string_view s) {
  s = trim(s);
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// "200-399" or "200,204,300-399". Returns an error text, or "" with `out` filled.
std::string parse_status_list(std::string_view text, std::vector<StatusRange>& out) {
  out.clear();
  if (trim(text).empty()) return "is empty";
  while (true) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    std::size_t dash = item.find('-');
    std::optional<int> lo = parse_status_code(item.substr(0, dash));
    std::optional<int> hi =
        dash == std::string_view::npos ? lo : parse_status_code(item.substr(dash + 1));
    if (!lo || !hi) return "has an invalid entry " + quote(trim(item));
    if (*lo < 100 || *lo > 599 || *hi < 100 || *hi > 599)
      return "entry " + quote(trim(item)) + " is outside 100..599";
    if (*lo > *hi) return "entry " + quote(trim(item)) + " has its bounds reversed";
    if (out.size() == kMaxStatusRanges)
      return "has too many entries (max " + std::to_string(kMaxStatusRanges) + ")";
    out.push_back(StatusRange{*lo, *hi});
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return "";
}

// True when the table names the supported kind; reports a missing or unsupported kind.
bool check_kind(const TableReader& r, std::string_view supported, std::string_view what) {
  if (!r.has("kind")) {
    r.missing("kind");
    return false;
  }
  auto kind = r.string("kind", 1024);
  if (!kind) return false;
  if (*kind != supported) {
    r.error_at_value("kind", r.path("kind") + ": unsupported " + std::string(what) + " kind " +
                                 quote(*kind) + " (supported: " + std::string(supported) + ")");
    return false;
  }
  return true;
}

// Reads the optional name; an explicit but invalid name leaves the default in place.
std::string read_name(const TableReader& r, std::string_view kind, std::size_t index) {
  std::string name = std::string(kind) + "#" + std::to_string(index);
  if (auto v = r.string("name", 1024)) {
    if (valid_name(*v))
      name = *v;
    else
      r.error_at_value("name", name_problem(r.path("name"), *v));
  }
  return name;
}

Probe parse_probe(const TableReader& r, std::size_t index, std::optional<core::Millis> interval) {
  Probe probe;
  probe.pos = r.sink().pos(r.table().source());
  if (!check_kind(r, "http", "probe")) return probe;
  probe.kind = "http";
  r.reject_unknown_keys();
  probe.name = read_name(r, "http", index);
  HttpProbe& h = probe.http;
  if (auto url = r.string("url", kMaxUrlLen)) {
    if (std::string problem = url_problem(*url); !problem.empty())
      r.error_at_value("url", r.path("url") + ": " + quote(*url) + " " + problem);
    else
      h.url = *url;
  } else if (!r.has("url")) {
    r.missing("url");
  }
  if (auto v = r.choice("method", {"GET", "HEAD"})) h.method = *v;
  if (const toml::node* n = r.node("expect_status")) {
    if (!n->is_string()) {
      r.error_at_value("expect_status", r.path("expect_status") +
                                            ": expected a status list string like \"200-399\", "
                                            "got " +
                                            std::string(type_name(*n)));
    } else if (auto text = r.string("expect_status", 1024)) {
      std::vector<StatusRange> ranges;
      std::string problem = parse_status_list(*text, ranges);
      if (problem.empty())
        h.expect_status = std::move(ranges);
      else
        r.error_at_value("expect_status", r.path("expect_status") + ": " + quote(*text) + " " +
                                              problem +
                                              " (expected e.g. \"200-399\" or "
                                              "\"200,204,300-399\")");
    }
  }
  if (auto v = r.string("body_contains", kMaxBodyContains)) h.body_contains = *v;
  if (auto v = r.string_map("headers", kMaxHeaders, kMaxHeaderValue, header_name_problem))
    h.headers = std::move(*v);
  std::optional<core::Millis> timeout = core::Millis(h.timeout);
  if (r.has("timeout")) timeout = r.duration("timeout", core::Millis(10), std::chrono::seconds(60));
  if (timeout) h.timeout = *timeout;
  if (interval && timeout && *timeout > *interval) {
    std::string message = r.path("timeout") + " (" + format_exact(h.timeout) +
                          (r.has("timeout") ? "" : ", the default") +
                          ") must not exceed the group interval (" + format_exact(*interval) + ")";
    r.error_at_key("timeout", message);
  }
  if (auto v = r.boolean("tls_verify")) h.tls_verify = *v;
  if (auto v = r.string("ca_file", kMaxPathLen)) {
    if (v->empty())
      r.error_at_value("ca_file", r.path("ca_file") + ": must not be empty");
    else
      h.ca_file = *v;
  }
  if (auto v = r.integer("max_body", 1, 16 * 1024 * 1024))
    h.max_body = static_cast<std::size_t>(*v);
  return probe;
}

void parse_argv(const TableReader& r, Step& step) {
  const toml::node* n = r.node("argv");
  if (!n) {
    r.missing("argv");
    return;
  }
  const toml::array* a = n->as_array();
  if (!a) {
    r.error_at_value("argv", r.path("argv") + ": expected an array of strings, got " +
                                 std::string(type_name(*n)));
    return;
  }
  if (a->empty() || a->size() > kMaxArgs) {
    r.error_at_value("argv", r.path("argv") + ": must have 1.." + std::to_string(kMaxArgs) +
                                 " elements, has " + std::to_string(a->size()));
    return;
  }
  std::vector<std::string> argv;
  bool ok = true;
  for (std::size_t i = 0; i < a->size(); ++i) {
    const toml::node& e = *a->get(i);
    std::string where = r.path("argv") + "[" + std::to_string(i) + "]";
    const auto* s = e.as_string();
    if (!s) {
      r.sink().add(e.source(), where + ": expected a string, got " + std::string(type_name(e)));
      ok = false;
      continue;
    }
    const std::string& arg = s->get();
    if (arg.size() > kMaxArgLen) {
      r.sink().add(e.source(), where + ": too long (" + std::to_string(arg.size()) +
                                   " bytes, max " + std::to_string(kMaxArgLen) + ")");
      ok = false;
    } else if (arg.find('\0') != std::string::npos) {
      r.sink().add(e.source(), where + ": must not contain NUL characters");
      ok = false;
    } else if (i == 0 && (arg.empty() || arg[0] != '/')) {
      r.sink().add(e.source(), where + ": " + quote(arg) +
                                   " must be an absolute path (no shell, no PATH lookup)");
      ok = false;
    }
    argv.push_back(arg);
  }
  if (ok) step.argv = std::move(argv);
}

Step parse_step(const TableReader& r, std::size_t index) {
  Step step;
  step.pos = r.sink().pos(r.table().source());
  if (!check_kind(r, "exec", "step")) return step;
  step.kind = "exec";
  r.reject_unknown_keys();
  step.name = read_name(r, "exec", index);
  parse_argv(r, step);
  if (auto v = r.string_map("env", kMaxEnv, kMaxEnvValue, env_name_problem))
    step.env = std::move(*v);
  if (auto v = r.duration("timeout", core::Millis(1), std::chrono::hours(1))) step.timeout = *v;
  if (auto v = r.integer("retries", 0, 10)) step.retries = static_cast<int>(*v);
  if (auto v = r.choice("on_failure", {"abort", "continue"})) step.abort_on_failure = *v == "abort";
  return step;
}

// Items of a site or phase share one name space; report the later duplicate.
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

}  // namespace

Site parse_site(const TableReader& group, const std::string& site_key,
                std::optional<core::Millis> interval) {
  Site site;
  const toml::table* table = group.subtable(site_key);
  if (!table) return site;
  site.pos = group.sink().pos(table->source());
  const std::string table_path = "group." + site_key;
  TableReader s(group.sink(), *table, "in [" + table_path + "]", table_path + ".", {"probes"});
  s.reject_unknown_keys();
  if (!s.has("probes")) {
    s.missing("probes");
    return site;
  }
  const toml::array* probes = s.table_array("probes", kMaxProbesPerSite);
  if (!probes) return site;
  if (probes->empty()) {
    s.error_at_value("probes", s.path("probes") + ": at least one probe is required");
    return site;
  }
  const std::string probe_path = table_path + ".probes";
  for (std::size_t i = 0; i < probes->size(); ++i) {
    TableReader r(group.sink(), *probes->get(i)->as_table(), "in [" + probe_path + "]",
                  probe_path + ".",
                  {"kind", "name", "url", "method", "expect_status", "body_contains", "headers",
                   "timeout", "tls_verify", "ca_file", "max_body"});
    Probe probe = parse_probe(r, i, interval);
    check_unique(r, site.probes, probe, "probe");
    site.probes.push_back(std::move(probe));
  }
  return site;
}

std::vector<Step> parse_steps(const TableReader& group, core::Phase phase) {
  std::vector<Step> steps;
  const std::string key(core::to_string(phase));
  const toml::array* items = group.table_array(key, kMaxStepsPerPhase);
  if (!items) return steps;
  const std::string step_path = "group." + key;
  for (std::size_t i = 0; i < items->size(); ++i) {
    TableReader r(group.sink(), *items->get(i)->as_table(), "in [[" + step_path + "]]",
                  step_path + ".",
                  {"kind", "name", "argv", "env", "timeout", "retries", "on_failure"});
    Step step = parse_step(r, i);
    check_unique(r, steps, step, "step");
    steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace fo::config::detail
