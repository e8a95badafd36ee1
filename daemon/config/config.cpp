// Config loader entry points: read the file, parse TOML, validate [daemon], [[location]] and
// [[group]], and either return a complete Config or throw one ConfigException with every error.
#include "daemon/config/config.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "daemon/config/config_parts.hpp"
#include "daemon/config/toml_reader.hpp"
#include "daemon/platform/unique_fd.hpp"

namespace fo::config {
namespace {

using platform::UniqueFd;

using detail::ErrorSink;
using detail::quote;
using detail::TableReader;

constexpr std::size_t kMaxFileBytes = 1 << 20;
constexpr std::size_t kMaxPathLen = 4096;
// sockaddr_un::sun_path holds 108 bytes including the terminating NUL.
constexpr std::size_t kMaxSocketPathLen = 107;

std::string join(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) {
    if (!out.empty()) out += '\n';
    out += e.to_string();
  }
  return out;
}

// toml++ descriptions may quote raw input; keep the one-error-per-line format intact.
std::string one_line(std::string_view s) {
  std::string out;
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  return out;
}

// "127.0.0.1:9772" or "[::1]:9772"; port 0..65535 (0: any free port, for tests).
bool valid_listen(std::string_view s) {
  const std::size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return false;
  std::string_view host = s.substr(0, colon), port = s.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  unsigned value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + unsigned(c - '0');
  }
  if (value > 65535) return false;
  unsigned char buf[sizeof(struct in6_addr)];
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    return inet_pton(AF_INET6, std::string(host.substr(1, host.size() - 2)).c_str(), buf) == 1;
  return inet_pton(AF_INET, std::string(host).c_str(), buf) == 1;
}

DaemonSettings parse_daemon(ErrorSink& sink, const toml::table& table) {
  TableReader r(sink, table, "in [daemon]", "daemon.",
                {"state_db", "control_socket", "log_level", "store_queue_limit", "metrics_listen",
                 "max_concurrent_probes"});
  r.reject_unknown_keys();
  DaemonSettings d;
  auto non_empty = [&](std::string_view key, std::size_t max_len, std::string& out) {
    if (auto v = r.string(key, max_len)) {
      if (v->empty())
        r.error_at_value(key, r.path(key) + ": must not be empty");
      else
        out = *v;
    }
  };
  non_empty("state_db", kMaxPathLen, d.state_db);
  non_empty("control_socket", kMaxSocketPathLen, d.control_socket);
  if (auto v = r.choice("log_level", {"debug", "info", "warn", "error"})) d.log_level = *v;
  if (auto v = r.integer("store_queue_limit", 100, 1000000))
    d.store_queue_limit = static_cast<std::size_t>(*v);
  if (auto v = r.integer("max_concurrent_probes", 1, 65536))
    d.max_concurrent_probes = static_cast<std::size_t>(*v);
  if (auto v = r.string("metrics_listen", 64)) {
    if (v->empty() || valid_listen(*v))
      d.metrics_listen = *v;
    else
      r.error_at_value("metrics_listen",
                       "daemon.metrics_listen: " + quote(*v) +
                           " must be \"ADDR:PORT\" with an IP address, e.g. \"127.0.0.1:9772\" "
                           "or \"[::1]:9772\" (\"\" disables the endpoint)");
  }
  return d;
}

bool valid_address(const std::string& s) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

bool valid_interface(std::string_view s) {
  if (s.empty() || s.size() > 15) return false;
  for (char c : s)
    if (c == '/' || c == ':' || static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
  return true;
}

struct Locations {
  std::vector<Location> list;
  bool checkable = true;  // false if [[location]] itself was malformed: skip reference checks
};

// "http://IP:PORT" or "https://[v6]:PORT", optionally with a trailing "/": an IP literal, so
// no name lookup ever happens for an agent, and no path (the protocol fixes the paths).
std::string agent_url_problem(std::string_view url) {
  std::string_view rest;
  if (url.substr(0, 7) == "http://")
    rest = url.substr(7);
  else if (url.substr(0, 8) == "https://")
    rest = url.substr(8);
  else
    return "must start with http:// or https://";
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos || rest.find('@') != std::string_view::npos ||
      rest.find('?') != std::string_view::npos)
    return "must be scheme://IP:PORT only (no path, user or query)";
  const std::size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == rest.size())
    return "needs an explicit port (e.g. http://192.0.2.7:9773)";
  if (!valid_listen(rest))
    return "must name an IP address and a port 1..65535, e.g. \"http://192.0.2.7:9773\"";
  if (rest.substr(colon + 1) == "0") return "port 0 is not a valid agent port";
  return "";
}

void parse_agent_keys(const TableReader& r, Location& loc) {
  if (auto url = r.string("url", 256)) {
    if (std::string problem = agent_url_problem(*url); !problem.empty())
      r.error_at_value("url", "location.url: " + quote(*url) + " " + problem);
    else
      loc.agent.url = url->back() == '/' ? url->substr(0, url->size() - 1) : *url;
  } else if (!r.has("url")) {
    r.missing("url");
  }
  if (!r.has("token_file")) r.missing("token_file");
  for (auto [key, out] :
       {std::pair<std::string_view, std::string*>{"token_file", &loc.agent.token_file},
        {"ca_file", &loc.agent.ca_file}}) {
    if (auto v = r.string(key, kMaxPathLen)) {
      if (v->empty() || v->front() != '/')
        r.error_at_value(key, r.path(key) + ": " + quote(*v) + " must be an absolute path");
      else
        *out = *v;
    }
  }
  if (auto v = r.boolean("tls_verify")) loc.agent.tls_verify = *v;
  if (r.has("ca_file") && loc.agent.url.substr(0, 7) == "http://")
    r.error_at_key("ca_file", "location.ca_file: only for https:// agents");
  if (auto v = r.duration("timeout", core::Millis(10), std::chrono::minutes(5)))
    loc.agent.timeout = *v;
  for (std::string_view key : {"source_address", "interface"})
    if (r.has(key))
      r.error_at_key(key, r.path(key) +
                              ": only for kind = \"local\" (an agent probes from its "
                              "own host)");
}

Locations parse_locations(const TableReader& top) {
  Locations out;
  const auto default_local = [&] {
    Location l;
    l.name = "local";
    l.pos = top.sink().file_start();
    return l;
  };
  if (!top.has("location")) {
    out.list.push_back(default_local());
    return out;
  }
  const toml::array* arr = top.table_array("location", detail::kMaxLocations);
  if (!arr) {
    out.checkable = false;
    return out;
  }
  if (arr->empty()) {
    out.list.push_back(default_local());
    return out;
  }
  for (const toml::node& n : *arr) {
    const toml::node* kind_node = n.as_table()->get("kind");
    const bool agent = kind_node && kind_node->value<std::string>() == "agent";
    TableReader r(
        top.sink(), *n.as_table(), "in [[location]]", "location.",
        agent
            ? std::vector<std::string_view>{"name", "kind", "url", "token_file", "ca_file",
                                            "tls_verify", "timeout", "source_address", "interface"}
            : std::vector<std::string_view>{"name", "kind", "source_address", "interface"});
    r.reject_unknown_keys();
    Location loc;
    loc.pos = top.sink().pos(n.source());
    if (auto name = r.string("name", 1024)) {
      if (!detail::valid_name(*name)) {
        r.error_at_value("name", "location.name: " + quote(*name) +
                                     " must be 1..64 characters of A-Z a-z 0-9 _ . -");
      } else {
        loc.name = *name;
      }
    } else if (!r.has("name")) {
      r.missing("name");
    }
    if (auto kind = r.string("kind", 1024)) {
      if (*kind == "agent")
        loc.kind = LocationKind::agent;
      else if (*kind != "local")
        r.error_at_value("kind", "location.kind: unsupported location kind " + quote(*kind) +
                                     " (supported: local, agent)");
    } else if (!r.has("kind")) {
      r.missing("kind");
    }
    if (agent) {
      parse_agent_keys(r, loc);
    } else {
      if (auto addr = r.string("source_address", 64)) {
        if (valid_address(*addr))
          loc.source_address = *addr;
        else
          r.error_at_value("source_address", "location.source_address: " + quote(*addr) +
                                                 " is not an IPv4 or IPv6 address");
      }
      if (auto ifname = r.string("interface", 1024)) {
        if (valid_interface(*ifname))
          loc.interface = *ifname;
        else
          r.error_at_value("interface", "location.interface: " + quote(*ifname) +
                                            " is not an interface name (1..15 characters, no "
                                            "'/', ':' or spaces)");
      }
    }
    if (loc.name.empty()) continue;
    bool duplicate = false;
    for (const Location& other : out.list) {
      if (other.name == loc.name) {
        r.error_at_value("name", "duplicate location name " + quote(loc.name) +
                                     " (first defined at line " + std::to_string(other.pos.line) +
                                     ")");
        duplicate = true;
      }
    }
    if (!duplicate) out.list.push_back(std::move(loc));
  }
  return out;
}

std::vector<std::string> parse_group_locations(const TableReader& g, const Locations& locations) {
  std::vector<std::string> all;
  for (const Location& l : locations.list) all.push_back(l.name);
  const toml::node* n = g.node("locations");
  if (!n) return all;
  const toml::array* a = n->as_array();
  if (!a) {
    g.error_at_value("locations", "group.locations: expected an array of location names, got " +
                                      std::string(detail::type_name(*n)));
    return all;
  }
  if (a->empty()) {
    g.error_at_value("locations",
                     "group.locations: must name at least one location (omit it to use all)");
    return all;
  }
  if (a->size() > detail::kMaxLocations) {
    g.error_at_value("locations", "group.locations: too many entries (max " +
                                      std::to_string(detail::kMaxLocations) + ")");
    return all;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (const toml::node& e : *a) {
    const auto* s = e.as_string();
    if (!s) {
      g.sink().add(e.source(), "group.locations: expected a location name (string), got " +
                                   std::string(detail::type_name(e)));
      ok = false;
      continue;
    }
    const std::string& name = s->get();
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      g.sink().add(e.source(), "group.locations: location " + quote(name) + " is listed twice");
      ok = false;
      continue;
    }
    if (locations.checkable && std::find(all.begin(), all.end(), name) == all.end()) {
      std::string known;
      for (const std::string& k : all) known += (known.empty() ? "" : ", ") + k;
      g.sink().add(e.source(), "group.locations: unknown location " + quote(name) +
                                   " (defined: " + known + ")");
      ok = false;
      continue;
    }
    out.push_back(name);
  }
  return ok ? out : all;
}

Group parse_group(ErrorSink& sink, const toml::node& node, const Locations& locations) {
  TableReader g(sink, *node.as_table(), "in [[group]]", "group.",
                {"name", "interval", "locations", "primary", "secondary", "policy", "warm",
                 "failover", "failback", "cool"});
  g.reject_unknown_keys();
  Group group;
  group.pos = sink.pos(node.source());
  if (auto name = g.string("name", 1024)) {
    if (detail::valid_name(*name))
      group.name = *name;
    else
      g.error_at_value(
          "name", "group.name: " + quote(*name) + " must be 1..64 characters of A-Z a-z 0-9 _ . -");
  } else if (!g.has("name")) {
    g.missing("name");
  }
  std::optional<core::Millis> interval = core::Millis(10000);
  if (g.has("interval"))
    interval = g.duration("interval", core::Millis(100), std::chrono::hours(1));
  group.locations = parse_group_locations(g, locations);
  for (const char* site_name : {"primary", "secondary"}) {
    const std::string site = site_name;
    Site parsed;
    if (!g.has(site)) {
      g.sink().add(g.table().source(), "missing required table [group." + site + "] in [[group]]" +
                                           (group.name.empty() ? "" : " " + quote(group.name)));
    } else {
      parsed = detail::parse_site(g, site, interval);
    }
    (site == "primary" ? group.primary : group.secondary) = std::move(parsed);
  }
  group.policy = detail::parse_policy(g, interval, group.locations.size());
  for (core::Phase phase :
       {core::Phase::warm, core::Phase::failover, core::Phase::failback, core::Phase::cool})
    group.steps[static_cast<int>(phase)] = detail::parse_steps(g, phase);
  return group;
}

std::vector<Group> parse_groups(const TableReader& top, const Locations& locations) {
  std::vector<Group> groups;
  if (!top.has("group")) {
    top.sink().add(top.sink().file_start(), "no [[group]] defined: at least one group is required");
    return groups;
  }
  const toml::array* arr = top.table_array("group", detail::kMaxGroups);
  if (!arr) return groups;
  if (arr->empty()) {
    top.error_at_value("group", "group: at least one [[group]] is required");
    return groups;
  }
  for (const toml::node& n : *arr) {
    Group g = parse_group(top.sink(), n, locations);
    if (!g.name.empty()) {
      for (const Group& other : groups) {
        if (other.name == g.name) {
          const toml::node* name = n.as_table()->get("name");
          top.sink().add(name->source(), "duplicate group name " + quote(g.name) +
                                             " (first defined at line " +
                                             std::to_string(other.pos.line) + ")");
        }
      }
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace

std::string ConfigError::to_string() const {
  return pos.file + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column) + ": " +
         message;
}

ConfigException::ConfigException(std::vector<ConfigError> errors)
    : std::runtime_error(join(errors)), errors_(std::move(errors)) {}

const Group* Config::find_group(std::string_view name) const {
  for (const Group& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

const Location* Config::find_location(std::string_view name) const {
  for (const Location& l : locations)
    if (l.name == name) return &l;
  return nullptr;
}

Config parse_config(std::string_view text, const std::string& source_name) {
  ErrorSink sink(source_name);
  if (text.size() > kMaxFileBytes) {
    sink.add(sink.file_start(), "config is too large (" + std::to_string(text.size()) +
                                    " bytes, max " + std::to_string(kMaxFileBytes) + ")");
    throw ConfigException(sink.take());
  }
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    sink.add(e.source(), one_line(e.description()));
    throw ConfigException(sink.take());
  }
  Config config;
  config.source = source_name;
  TableReader top(sink, root, "at the top level", "", {"daemon", "location", "group"});
  top.reject_unknown_keys();
  if (const toml::table* daemon = top.subtable("daemon"))
    config.daemon = parse_daemon(sink, *daemon);
  Locations locations = parse_locations(top);
  config.groups = parse_groups(top, locations);
  config.locations = std::move(locations.list);
  if (!sink.empty()) throw ConfigException(sink.take());
  return config;
}

Config load_config_file(const std::string& path) {
  auto fail = [&](const std::string& message) {
    throw ConfigException({ConfigError{SourcePos{path, 1, 1}, message}});
  };
  int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw < 0) fail(std::string("cannot open config file: ") + std::strerror(errno));
  UniqueFd fd(raw);
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::string("cannot read config file: ") + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxFileBytes)
      fail("config file is too large (more than " + std::to_string(kMaxFileBytes) + " bytes)");
  }
  return parse_config(text, path);
}

}  // namespace fo::config
