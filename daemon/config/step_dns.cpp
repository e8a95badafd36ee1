// Config loader: the keys of a `dns` step (see docs/steps/dns.md).
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "daemon/config/config_parts.hpp"

namespace fo::config::detail {
namespace {

// An UPDATE and a verify answer of this many records stay far below 512 bytes, so plain UDP
// always suffices and a reply never needs TCP.
constexpr std::size_t kMaxValues = 8;
constexpr std::size_t kMaxVerifyServers = 16;
constexpr std::size_t kMaxNameLen = 256;
constexpr std::size_t kMaxUrlLen = 512;

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string absolute(std::string name) {
  name = lower(std::move(name));
  if (name.empty() || name.back() != '.') name += '.';
  return name;
}

// Canonical text of an address literal of `family` ("0:0::1" -> "::1"), "" if it is none.
std::string canonical_ip(const std::string& s, int family) {
  unsigned char buf[sizeof(in6_addr)];
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_pton(family, s.c_str(), buf) != 1) return "";
  return inet_ntop(family, buf, text, sizeof text) ? text : "";
}

// One value of `primary`/`secondary`: "" with `out` set, or the problem.
std::string value_problem(const std::string& type, const std::string& v, std::string& out) {
  if (type == "A" || type == "AAAA") {
    out = canonical_ip(v, type == "A" ? AF_INET : AF_INET6);
    if (out.empty())
      return std::string("is not an ") + (type == "A" ? "IPv4" : "IPv6") + " address (type = \"" +
             type + "\")";
    return "";
  }
  if (v == ".") return "must be a host name, not the root";
  if (std::string problem = dns_name_problem(v); !problem.empty()) return problem;
  out = absolute(v);
  return "";
}

std::vector<std::string> read_values(const TableReader& r, std::string_view key,
                                     const std::string& type) {
  std::vector<std::string> values;
  const toml::node* n = r.node(key);
  if (!n) {
    r.missing(key);
    return values;
  }
  const toml::array* a = n->as_array();
  if (!a) {
    r.error_at_value(
        key, r.path(key) + ": expected an array of strings, got " + std::string(type_name(*n)));
    return values;
  }
  const std::size_t max = type == "CNAME" ? 1 : kMaxValues;
  if (a->empty() || a->size() > max) {
    r.error_at_value(key, r.path(key) + ": must have 1.." + std::to_string(max) +
                              " values for type = \"" + type + "\", has " +
                              std::to_string(a->size()));
    return values;
  }
  bool ok = true;
  for (std::size_t i = 0; i < a->size(); ++i) {
    const toml::node& e = *a->get(i);
    const std::string where = r.path(key) + "[" + std::to_string(i) + "]";
    const auto* s = e.as_string();
    if (!s) {
      r.sink().add(e.source(), where + ": expected a string, got " + std::string(type_name(e)));
      ok = false;
      continue;
    }
    std::string value;
    if (s->get().size() > kMaxNameLen) {
      r.sink().add(e.source(), where + ": too long (max " + std::to_string(kMaxNameLen) + ")");
      ok = false;
    } else if (std::string problem = value_problem(type, s->get(), value); !problem.empty()) {
      r.sink().add(e.source(), where + ": " + quote(s->get()) + " " + problem);
      ok = false;
    } else if (std::find(values.begin(), values.end(), value) != values.end()) {
      r.sink().add(e.source(), where + ": " + quote(s->get()) + " is listed twice");
      ok = false;
    } else {
      values.push_back(value);
    }
  }
  if (!ok) return {};
  std::sort(values.begin(), values.end());
  return values;
}

bool read_server(const TableReader& r, const toml::node& n, const std::string& where,
                 DnsServer& out) {
  const auto* s = n.as_string();
  if (!s) {
    r.sink().add(n.source(), where + ": expected a string, got " + std::string(type_name(n)));
    return false;
  }
  Endpoint endpoint;
  if (s->get().size() > 64) {
    r.sink().add(n.source(), where + ": too long (max 64)");
    return false;
  }
  if (std::string problem = parse_endpoint(s->get(), 53, endpoint); !problem.empty()) {
    r.sink().add(n.source(), where + ": " + quote(s->get()) + " " + problem);
    return false;
  }
  out.text = s->get();
  out.host = endpoint.host;
  out.port = endpoint.port;
  return true;
}

// "http(s)://IP[:PORT][/]": the API's base; the step appends /api/v1/servers/...
std::string api_url_problem(const std::string& url) {
  if (std::string problem = url_problem(url); !problem.empty()) return problem;
  std::string_view rest = std::string_view(url).substr(url.find("://") + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos)
    return "must be only scheme, address and port, e.g. \"http://127.0.0.1:8081\" (no path, "
           "query or user)";
  std::string host;
  if (rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return "has an unclosed '['";
    host = std::string(rest.substr(1, close - 1));
  } else {
    host = std::string(rest.substr(0, rest.find(':')));
  }
  if (!is_ip(host)) return "must name the API by IP address, not a host name";
  return "";
}

void only_for(const TableReader& r, std::string_view key, const std::string& provider,
              std::string_view owner) {
  if (r.has(key) && provider != owner)
    r.error_at_key(key, r.path(key) + ": only for provider = \"" + std::string(owner) +
                            "\" (this step uses \"" + provider + "\")");
}

void parse_names(const TableReader& r, DnsStep& out) {
  if (auto v = r.string("zone", kMaxNameLen)) {
    if (std::string problem = dns_name_problem(*v); !problem.empty() || *v == ".")
      r.error_at_value("zone", r.path("zone") + ": " + quote(*v) + " " +
                                   (problem.empty() ? "must not be the root" : problem));
    else
      out.zone = absolute(*v);
  } else if (!r.has("zone")) {
    r.missing("zone");
  }
  auto v = r.string("record", kMaxNameLen);
  if (!v) {
    if (!r.has("record")) r.missing("record");
    return;
  }
  if (out.zone.empty()) return;
  auto bad = [&](const std::string& problem) {
    r.error_at_value("record", r.path("record") + ": " + quote(*v) + " " + problem);
  };
  std::string name;
  if (*v == "@") {
    name = out.zone;
  } else if (!v->empty() && v->back() == '.') {
    name = lower(*v);
    if (name != out.zone &&
        (name.size() <= out.zone.size() ||
         name.compare(name.size() - out.zone.size() - 1, std::string::npos, "." + out.zone) != 0))
      return bad("is not inside zone " + quote(out.zone));
  } else {
    name = lower(*v) + "." + out.zone;
  }
  if (std::string problem = dns_name_problem(name); !problem.empty()) return bad(problem);
  out.record = name;
}

}  // namespace

std::vector<std::string_view> dns_step_keys() {
  return {"provider", "zone",         "record",    "type",   "ttl",
          "primary",  "secondary",    "server",    "tsig",   "tsig_key_file",
          "api_url",  "api_key_file", "server_id", "verify", "verify_interval"};
}

void parse_dns_step(const TableReader& r, DnsStep& out) {
  if (auto v = r.choice("provider", {"rfc2136", "powerdns"})) out.provider = *v;
  const std::string& provider = out.provider;
  parse_names(r, out);
  bool type_ok = true;
  if (r.has("type")) {
    auto v = r.choice("type", {"A", "AAAA", "CNAME"});
    type_ok = v.has_value();
    if (v) out.type = *v;
  }
  if (out.type == "CNAME" && !out.record.empty() && out.record == out.zone)
    r.error_at_value("record", r.path("record") + ": a CNAME cannot be at the zone apex");
  if (auto v = r.integer("ttl", 1, 86400)) out.ttl = static_cast<int>(*v);
  if (type_ok) {
    out.primary = read_values(r, "primary", out.type);
    out.secondary = read_values(r, "secondary", out.type);
  }

  only_for(r, "server", provider, "rfc2136");
  only_for(r, "tsig", provider, "rfc2136");
  only_for(r, "tsig_key_file", provider, "rfc2136");
  only_for(r, "api_url", provider, "powerdns");
  only_for(r, "api_key_file", provider, "powerdns");
  only_for(r, "server_id", provider, "powerdns");
  if (provider == "rfc2136") {
    if (const toml::node* n = r.node("server"))
      read_server(r, *n, r.path("server"), out.server);
    else
      r.missing("server");
    if (auto v = r.boolean("tsig")) out.tsig = *v;
    read_path(r, "tsig_key_file", out.tsig_key_file);
    if (!out.tsig && r.has("tsig_key_file"))
      r.error_at_key("tsig_key_file",
                     r.path("tsig_key_file") + ": conflicts with tsig = false (remove one)");
    if (out.tsig && !r.has("tsig_key_file"))
      r.sink().add(r.table().source(), "missing required key 'tsig_key_file' " + r.label() +
                                           " (unsigned updates need an explicit tsig = false)");
  } else {
    if (auto v = r.string("api_url", kMaxUrlLen)) {
      if (std::string problem = api_url_problem(*v); !problem.empty())
        r.error_at_value("api_url", r.path("api_url") + ": " + quote(*v) + " " + problem);
      else
        out.api_url = v->back() == '/' ? v->substr(0, v->size() - 1) : *v;
    } else if (!r.has("api_url")) {
      r.missing("api_url");
    }
    read_path(r, "api_key_file", out.api_key_file);
    if (!r.has("api_key_file")) r.missing("api_key_file");
    if (auto v = r.string("server_id", 64)) {
      if (!valid_name(*v))
        r.error_at_value("server_id", r.path("server_id") + ": " + quote(*v) +
                                          " must be 1..64 of [A-Za-z0-9_.-]");
      else
        out.server_id = *v;
    }
  }

  if (const toml::node* n = r.node("verify")) {
    const toml::array* a = n->as_array();
    if (!a) {
      r.error_at_value("verify", r.path("verify") + ": expected an array of \"IP[:PORT]\", got " +
                                     std::string(type_name(*n)));
    } else if (a->empty() || a->size() > kMaxVerifyServers) {
      r.error_at_value("verify", r.path("verify") + ": must list 1.." +
                                     std::to_string(kMaxVerifyServers) + " servers, has " +
                                     std::to_string(a->size()));
    } else {
      for (std::size_t i = 0; i < a->size(); ++i) {
        DnsServer s;
        const std::string where = r.path("verify") + "[" + std::to_string(i) + "]";
        if (!read_server(r, *a->get(i), where, s)) continue;
        const bool dup = std::any_of(out.verify.begin(), out.verify.end(), [&](const auto& o) {
          return o.host == s.host && o.port == s.port;
        });
        if (dup)
          r.sink().add(a->get(i)->source(), where + ": " + quote(s.text) + " is listed twice");
        else
          out.verify.push_back(std::move(s));
      }
    }
  } else if (provider == "rfc2136") {
    if (!out.server.host.empty()) out.verify = {out.server};
  } else {
    r.sink().add(r.table().source(),
                 "missing required key 'verify' " + r.label() +
                     " (the DNS servers that serve the zone, e.g. [\"127.0.0.1:53\"])");
  }
  if (auto v = r.duration("verify_interval", core::Millis(10), core::Millis(60000)))
    out.verify_interval = *v;
}

}  // namespace fo::config::detail
