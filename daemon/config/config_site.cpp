// Config loader: the probes of a site ([group.primary] / [group.secondary]), and the value
// helpers (endpoints, names, paths, argv, ...) shared with the step parsers.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <regex>
#include <utility>

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
constexpr std::size_t kMaxBodyRegex = 256;
constexpr std::size_t kMaxTcpSend = 4096;
constexpr std::size_t kMaxExpect = 1024;
constexpr std::size_t kMaxConninfo = 1024;

const std::vector<std::string_view> kProbeKinds = {"http", "tcp", "dns", "postgres", "exec"};

// Keys of every probe table, then the keys of each kind. Unknown keys are errors.
std::vector<std::string_view> probe_keys(std::string_view kind) {
  std::vector<std::string_view> keys = {"kind", "name", "timeout"};
  std::vector<std::string_view> more;
  if (kind == "http")
    more = {"url",     "method",     "expect_status", "body_contains", "body_regex",
            "headers", "tls_verify", "ca_file",       "client_cert",   "client_key",
            "resolve", "max_body",   "abortive_close"};
  else if (kind == "tcp")
    more = {"address", "send", "expect", "max_read"};
  else if (kind == "dns")
    more = {"server", "qname", "type", "expect", "rcode"};
  else if (kind == "postgres")
    more = {"conninfo", "host", "port", "dbname", "user", "password_file", "role", "max_lag"};
  else if (kind == "exec")
    more = {"argv", "max_output"};
  keys.insert(keys.end(), more.begin(), more.end());
  return keys;
}

}  // namespace

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

// The table's kind if it is one of `supported`; reports a missing or unsupported kind.
std::optional<std::string> check_kind(const TableReader& r,
                                      const std::vector<std::string_view>& supported,
                                      std::string_view what) {
  if (!r.has("kind")) {
    r.missing("kind");
    return std::nullopt;
  }
  auto kind = r.string("kind", 1024);
  if (!kind) return std::nullopt;
  if (std::find(supported.begin(), supported.end(), *kind) == supported.end()) {
    std::string list;
    for (std::string_view k : supported) list += (list.empty() ? "" : ", ") + std::string(k);
    r.error_at_value("kind", r.path("kind") + ": unsupported " + std::string(what) + " kind " +
                                 quote(*kind) + " (supported: " + list + ")");
    return std::nullopt;
  }
  return kind;
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

bool is_ip(const std::string& s, int family) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(family, s.c_str(), buf) == 1;
}

bool is_ip(const std::string& s) {
  return is_ip(s, AF_INET) || is_ip(s, AF_INET6);
}

// Canonical text of an address literal ("0:0::1" -> "::1"), or "" if it is none.
std::string canonical_ip(const std::string& s, int family) {
  unsigned char buf[sizeof(in6_addr)];
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_pton(family, s.c_str(), buf) != 1) return "";
  return inet_ntop(family, buf, text, sizeof text) ? text : "";
}

// "192.0.2.1:80" or "[2001:db8::1]:80"; the port may be left out when default_port > 0.
std::string parse_endpoint(std::string_view text, int default_port, Endpoint& out) {
  const char* form = default_port > 0 ? "IP or IP:PORT, IPv6 in brackets, e.g. \"[::1]:53\""
                                      : "IP:PORT, IPv6 in brackets, e.g. \"[::1]:443\"";
  std::string host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) return std::string("must be ") + form;
    host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return std::string("must be ") + form;
    if (!rest.empty()) port = rest.substr(1);
    if (!is_ip(host, AF_INET6)) return "has no IPv6 address in the brackets";
  } else {
    std::size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos)
      return std::string("must be ") + form;
    host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) port = text.substr(colon + 1);
    if (!is_ip(host, AF_INET))
      return std::string("must be ") + form + " (an address, not a host name)";
  }
  int value = default_port;
  if (!port.empty() || default_port <= 0) {
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 1 ||
        value > 65535)
      return "has no valid port (1..65535)";
  }
  out.host = host;
  out.port = value;
  return "";
}

// The host part of an http(s) URL that url_problem() accepted; IPv6 keeps its brackets.
std::string_view url_host(std::string_view url) {
  std::string_view rest = url.substr(url.find("://") + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (std::size_t at = rest.rfind('@'); at != std::string_view::npos) rest = rest.substr(at + 1);
  if (!rest.empty() && rest.front() == '[') return rest.substr(0, rest.find(']') + 1);
  return rest.substr(0, rest.find(':'));
}

// Letters, digits, '-', '_' and '*' in labels of 1..63 bytes, 253 bytes in all; "." is the root.
std::string dns_name_problem(std::string_view name) {
  if (name == ".") return "";
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty() || name.size() > 253) return "must be a DNS name of 1..253 characters";
  std::size_t label = 0;
  for (char c : name) {
    if (c == '.') {
      if (label == 0) return "has an empty label";
      label = 0;
      continue;
    }
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '*';
    if (!ok) return "may only contain letters, digits, '-', '_', '*' and dots";
    if (++label > 63) return "has a label longer than 63 characters";
  }
  if (label == 0) return "has an empty label";
  return "";
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// "16MB", "512kB", "1GB", "4096B" (1024-based like PostgreSQL's units); nullopt if not a size.
std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view unit = trim(text.substr(static_cast<std::size_t>(end - text.data())));
  std::uint64_t factor = 0;
  if (unit == "B")
    factor = 1;
  else if (unit == "kB" || unit == "KB")
    factor = 1024;
  else if (unit == "MB")
    factor = 1024 * 1024;
  else if (unit == "GB")
    factor = 1024ULL * 1024 * 1024;
  if (factor == 0 || value > (std::uint64_t(1) << 50) / factor) return std::nullopt;
  return value * factor;
}

// `timeout` (default `dflt`), which must not exceed the group interval: a probe still running
// when the next round starts would delay it.
core::Millis read_timeout(const TableReader& r, core::Millis dflt,
                          std::optional<core::Millis> interval) {
  std::optional<core::Millis> timeout = dflt;
  if (r.has("timeout")) timeout = r.duration("timeout", core::Millis(10), std::chrono::seconds(60));
  if (interval && timeout && *timeout > *interval) {
    std::string message = r.path("timeout") + " (" + format_exact(*timeout) +
                          (r.has("timeout") ? "" : ", the default") +
                          ") must not exceed the group interval (" + format_exact(*interval) + ")";
    r.error_at_key("timeout", message);
  }
  return timeout.value_or(dflt);
}

void read_path(const TableReader& r, std::string_view key, std::string& out) {
  if (auto v = r.string(key, kMaxPathLen)) {
    if (v->empty())
      r.error_at_value(key, r.path(key) + ": must not be empty");
    else
      out = *v;
  }
}

// True if the pattern has a counted repetition ("a{100}"), outside escapes and brackets.
bool has_counted_repetition(std::string_view pattern) {
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '{' && i + 1 < pattern.size() && pattern[i + 1] >= '0' &&
               pattern[i + 1] <= '9') {
      return true;
    }
  }
  return false;
}

// std::regex::ECMAScript plus libstdc++'s __polynomial: matching runs as a breadth-first NFA
// (no backreferences), in time proportional to body size x pattern size, so a hostile body
// can neither blow the stack nor cause exponential time. Counted repetitions are refused
// because they multiply the NFA's size ("(a{50}){50}" has 2500 states).
// probes/http/http_probe.cpp compiles with the same flags.
std::string regex_problem(const std::string& pattern) {
  if (pattern.empty()) return "must not be empty";
  if (has_counted_repetition(pattern))
    return "is not supported (counted repetitions like {2,5} are not allowed)";
  try {
    std::regex re(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
  } catch (const std::regex_error& e) {
    if (e.code() == std::regex_constants::error_complexity)
      return "is not supported (backreferences are not allowed)";
    return std::string("is not a valid regular expression (") + e.what() + ")";
  }
  return "";
}

void parse_http(const TableReader& r, HttpProbe& h) {
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
  if (auto v = r.string("body_regex", kMaxBodyRegex)) {
    if (std::string problem = regex_problem(*v); !problem.empty())
      r.error_at_value("body_regex", r.path("body_regex") + ": " + quote(*v) + " " + problem);
    else
      h.body_regex = *v;
  }
  if (auto v = r.string_map("headers", kMaxHeaders, kMaxHeaderValue, header_name_problem))
    h.headers = std::move(*v);
  if (auto v = r.boolean("tls_verify")) h.tls_verify = *v;
  read_path(r, "ca_file", h.ca_file);
  read_path(r, "client_cert", h.client_cert);
  read_path(r, "client_key", h.client_key);
  if (r.has("client_key") && !r.has("client_cert"))
    r.error_at_key("client_key", r.path("client_key") + ": needs client_cert as well");
  if (auto v = r.string("resolve", 64)) {
    if (!is_ip(*v)) {
      r.error_at_value("resolve", r.path("resolve") + ": " + quote(*v) +
                                      " is not an IPv4 or IPv6 address (no brackets)");
    } else if (!h.url.empty() && (url_host(h.url).substr(0, 1) == "[" ||
                                  is_ip(std::string(url_host(h.url)), AF_INET))) {
      r.error_at_value("resolve", r.path("resolve") +
                                      ": the url's host is already an address; resolve needs "
                                      "a host name in the url");
    } else {
      h.resolve = *v;
    }
  }
  if (auto v = r.integer("max_body", 1, 16 * 1024 * 1024))
    h.max_body = static_cast<std::size_t>(*v);
  if (auto v = r.boolean("abortive_close")) h.abortive_close = *v;
}

void parse_tcp(const TableReader& r, TcpProbe& t) {
  if (auto v = r.string("address", 128)) {
    if (std::string problem = parse_endpoint(*v, 0, t.endpoint); !problem.empty())
      r.error_at_value("address", r.path("address") + ": " + quote(*v) + " " + problem);
    else
      t.address = *v;
  } else if (!r.has("address")) {
    r.missing("address");
  }
  if (auto v = r.string("send", kMaxTcpSend)) t.send = *v;
  if (auto v = r.string("expect", kMaxExpect)) {
    if (v->empty())
      r.error_at_value("expect", r.path("expect") + ": must not be empty (omit it instead)");
    else
      t.expect = *v;
  }
  if (auto v = r.integer("max_read", 1, 1024 * 1024)) t.max_read = static_cast<std::size_t>(*v);
  if (!t.expect.empty() && t.expect.size() > t.max_read)
    r.error_at_value("expect", r.path("expect") + ": longer than max_read (" +
                                   std::to_string(t.max_read) + " bytes)");
}

void parse_dns(const TableReader& r, DnsProbe& d) {
  if (auto v = r.string("server", 128)) {
    if (std::string problem = parse_endpoint(*v, 53, d.endpoint); !problem.empty())
      r.error_at_value("server", r.path("server") + ": " + quote(*v) + " " + problem);
    else
      d.server = *v;
  } else if (!r.has("server")) {
    r.missing("server");
  }
  if (auto v = r.string("qname", 256)) {
    if (std::string problem = dns_name_problem(*v); !problem.empty())
      r.error_at_value("qname", r.path("qname") + ": " + quote(*v) + " " + problem);
    else
      d.name = v->back() == '.' ? *v : *v + ".";
  } else if (!r.has("qname")) {
    r.missing("qname");
  }
  if (auto v = r.choice("type", {"A", "AAAA", "CNAME", "TXT", "NS", "SOA", "MX"})) d.type = *v;
  if (auto v = r.choice("rcode", {"NOERROR", "NXDOMAIN", "SERVFAIL", "REFUSED"})) d.rcode = *v;
  auto v = r.string("expect", kMaxExpect);
  if (!v) return;
  auto bad = [&](const std::string& problem) {
    r.error_at_value("expect", r.path("expect") + ": " + quote(*v) + " " + problem);
  };
  if (d.rcode != "NOERROR") return bad("needs rcode = \"NOERROR\" (the default)");
  if (v->empty()) return bad("must not be empty (omit it instead)");
  if (d.type == "A" || d.type == "AAAA") {
    const int family = d.type == "A" ? AF_INET : AF_INET6;
    d.expect = canonical_ip(*v, family);
    if (d.expect.empty())
      bad(std::string("is not an ") + (d.type == "A" ? "IPv4" : "IPv6") + " address (type = \"" +
          d.type + "\")");
  } else if (d.type == "CNAME" || d.type == "NS") {
    if (std::string problem = dns_name_problem(*v); !problem.empty()) return bad(problem);
    d.expect = lower(*v);
    if (d.expect.size() > 1 && d.expect.back() == '.') d.expect.pop_back();
  } else {
    d.expect = *v;
  }
}

bool has_password(std::string_view conninfo) {
  const std::string text = lower(std::string(conninfo));
  for (std::size_t at = text.find("password"); at != std::string::npos;
       at = text.find("password", at + 1)) {
    std::string_view rest = trim(std::string_view(text).substr(at + 8));
    if (!rest.empty() && rest.front() == '=') return true;
  }
  std::size_t scheme = text.find("://");
  if (scheme != std::string::npos) {
    std::string_view authority = std::string_view(text).substr(scheme + 3);
    authority = authority.substr(0, authority.find_first_of("/?"));
    std::size_t at = authority.rfind('@');
    if (at != std::string_view::npos && authority.substr(0, at).find(':') != std::string::npos)
      return true;
  }
  return false;
}

// host/port/dbname/user/password_file of a PostgreSQL connection (probe and step).
void read_pg_endpoint(const TableReader& r, std::string& host, int& port, std::string& dbname,
                      std::string& user, std::string& password_file) {
  if (auto v = r.string("host", kMaxPathLen)) {
    if (is_ip(*v) || (!v->empty() && v->front() == '/'))
      host = *v;
    else
      r.error_at_value("host", r.path("host") + ": " + quote(*v) +
                                   " must be an IP address or a socket directory (no name "
                                   "lookups on the event loop)");
  }
  if (auto v = r.integer("port", 1, 65535)) port = static_cast<int>(*v);
  for (auto [key, out] :
       {std::pair<std::string_view, std::string*>{"dbname", &dbname}, {"user", &user}}) {
    if (auto v = r.string(key, 63)) {
      if (v->empty())
        r.error_at_value(key, r.path(key) + ": must not be empty");
      else
        *out = *v;
    }
  }
  if (auto v = r.string("password_file", kMaxPathLen)) {
    if (v->empty() || v->front() != '/')
      r.error_at_value("password_file",
                       r.path("password_file") + ": " + quote(*v) + " must be an absolute path");
    else
      password_file = *v;
  }
}

void parse_postgres(const TableReader& r, PostgresProbe& p) {
  const bool keys = r.has("host") || r.has("port") || r.has("dbname") || r.has("user");
  if (r.has("conninfo") && keys) {
    for (std::string_view key : {"host", "port", "dbname", "user"})
      if (r.has(key))
        r.error_at_key(key, r.path(key) + ": give either conninfo or host/port/dbname/user");
  } else if (!r.has("conninfo") && !r.has("host")) {
    r.sink().add(r.table().source(), "missing required key 'host' (or 'conninfo') " + r.label());
  }
  if (auto v = r.string("conninfo", kMaxConninfo)) {
    if (v->empty())
      r.error_at_value("conninfo", r.path("conninfo") + ": must not be empty");
    else if (has_password(*v))
      r.error_at_value("conninfo",
                       r.path("conninfo") + ": must not contain a password (use password_file)");
    else
      p.conninfo = *v;
  }
  read_pg_endpoint(r, p.host, p.port, p.dbname, p.user, p.password_file);
  if (auto v = r.choice("role", {"primary", "standby"})) p.role = *v;
  if (auto v = r.string("max_lag", 64)) {
    const std::string_view text = trim(*v);
    if (!text.empty() && text.back() == 'B') {
      std::optional<std::uint64_t> bytes = parse_size(text);
      if (!bytes || *bytes == 0)
        r.error_at_value("max_lag", r.path("max_lag") + ": " + quote(*v) +
                                        " is not a size from 1B to 1048576GB (e.g. \"16MB\")");
      else
        p.max_lag_bytes = *bytes;
    } else {
      std::optional<core::Millis> d = core::parse_duration(text);
      if (!d || d->count() < 1 || *d > std::chrono::hours(24))
        r.error_at_value("max_lag", r.path("max_lag") + ": " + quote(*v) +
                                        " must be a size like \"16MB\" or a duration from 1ms "
                                        "to 24h like \"30s\"");
      else
        p.max_lag_time = *d;
    }
    if (p.max_lag_bytes > 0 || p.max_lag_time.count() > 0) p.max_lag = std::string(text);
    // An invalid role was reported already.
    if (!r.has("role") || (!p.role.empty() && p.role != "standby"))
      r.error_at_key("max_lag", r.path("max_lag") + ": needs role = \"standby\"");
  }
}

// Absolute argv[0], no NUL; nullopt (reported) when missing or invalid.
std::optional<std::vector<std::string>> parse_argv(const TableReader& r) {
  const toml::node* n = r.node("argv");
  if (!n) {
    r.missing("argv");
    return std::nullopt;
  }
  const toml::array* a = n->as_array();
  if (!a) {
    r.error_at_value("argv", r.path("argv") + ": expected an array of strings, got " +
                                 std::string(type_name(*n)));
    return std::nullopt;
  }
  if (a->empty() || a->size() > kMaxArgs) {
    r.error_at_value("argv", r.path("argv") + ": must have 1.." + std::to_string(kMaxArgs) +
                                 " elements, has " + std::to_string(a->size()));
    return std::nullopt;
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
  if (!ok) return std::nullopt;
  return argv;
}

Probe parse_probe(ErrorSink& sink, const toml::table& table, const std::string& probe_path,
                  std::size_t index, std::optional<core::Millis> interval) {
  Probe probe;
  probe.pos = sink.pos(table.source());
  const std::string label = "in [" + probe_path + "]";
  TableReader kind_reader(sink, table, label, probe_path + ".", {"kind"});
  std::optional<std::string> kind = check_kind(kind_reader, kProbeKinds, "probe");
  if (!kind) return probe;
  probe.kind = *kind;
  TableReader r(sink, table, label, probe_path + ".", probe_keys(*kind));
  r.reject_unknown_keys();
  probe.name = read_name(r, *kind, index);
  const core::Millis timeout = read_timeout(r, core::Millis(5000), interval);
  if (*kind == "http") {
    parse_http(r, probe.http);
    probe.http.timeout = timeout;
  } else if (*kind == "tcp") {
    parse_tcp(r, probe.tcp);
    probe.tcp.timeout = timeout;
  } else if (*kind == "dns") {
    parse_dns(r, probe.dns);
    probe.dns.timeout = timeout;
  } else if (*kind == "postgres") {
    parse_postgres(r, probe.postgres);
    probe.postgres.timeout = timeout;
  } else {
    if (auto argv = parse_argv(r)) probe.exec.argv = std::move(*argv);
    if (auto v = r.integer("max_output", 1, 1024 * 1024))
      probe.exec.max_output = static_cast<std::size_t>(*v);
    probe.exec.timeout = timeout;
  }
  return probe;
}

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
    const toml::table& table = *probes->get(i)->as_table();
    Probe probe = parse_probe(group.sink(), table, probe_path, i, interval);
    TableReader r(group.sink(), table, "in [" + probe_path + "]", probe_path + ".", {});
    check_unique(r, site.probes, probe, "probe");
    site.probes.push_back(std::move(probe));
  }
  return site;
}

}  // namespace fo::config::detail
