// Agent config loader (see agent_config.hpp): [agent] only, unknown keys are errors, and every
// error carries file:line:column, through the same TableReader as failoverd.toml.
#include "daemon/agent/agent_config.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/config/config_parts.hpp"
#include "daemon/config/toml_reader.hpp"
#include "daemon/metrics/server.hpp"

namespace fo::agent {
namespace {

using config::ConfigError;
using config::ConfigException;
using config::SourcePos;
using config::detail::ErrorSink;
using config::detail::quote;
using config::detail::TableReader;

constexpr std::size_t kMaxFileBytes = 64 * 1024;
constexpr std::size_t kMaxPathLen = 4096;

void read_abs_path(const TableReader& r, std::string_view key, std::string& out) {
  if (auto v = r.string(key, kMaxPathLen)) {
    if (v->empty() || v->front() != '/')
      r.error_at_value(key, r.path(key) + ": " + quote(*v) + " must be an absolute path");
    else
      out = *v;
  }
}

}  // namespace

AgentConfig parse_agent_config(std::string_view text, const std::string& source_name) {
  ErrorSink sink(source_name);
  if (text.size() > kMaxFileBytes) {
    sink.add(sink.file_start(), "agent config is too large (" + std::to_string(text.size()) +
                                    " bytes, max " + std::to_string(kMaxFileBytes) + ")");
    throw ConfigException(sink.take());
  }
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    std::string what(e.description());
    for (char& c : what)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    sink.add(e.source(), what);
    throw ConfigException(sink.take());
  }
  AgentConfig cfg;
  cfg.source = source_name;
  cfg.location.name = "agent";
  TableReader top(sink, root, "at the top level", "", {"agent"});
  top.reject_unknown_keys();
  const toml::table* t = top.subtable("agent");
  if (!t) {
    if (!top.has("agent")) sink.add(sink.file_start(), "missing required table [agent]");
    throw ConfigException(sink.take());
  }
  TableReader r(
      sink, *t, "in [agent]", "agent.",
      {"listen", "token_file", "allow_exec", "max_request_bytes", "max_probes_per_request",
       "max_concurrent_requests", "max_requests_per_second", "max_concurrent_probes", "tls_cert",
       "tls_key", "location", "source_address", "interface", "log_level"});
  r.reject_unknown_keys();
  if (auto v = r.string("listen", 64)) {
    if (metrics::parse_listen(*v))
      cfg.listen = *v;
    else
      r.error_at_value("listen", "agent.listen: " + quote(*v) +
                                     " must be \"ADDR:PORT\" with an IP address, e.g. "
                                     "\"192.0.2.7:9773\" or \"[::1]:9773\"");
  } else if (!r.has("listen")) {
    r.missing("listen");
  }
  if (!r.has("token_file")) r.missing("token_file");
  read_abs_path(r, "token_file", cfg.token_file);
  if (auto v = r.boolean("allow_exec")) cfg.allow_exec = *v;
  if (auto v = r.integer("max_request_bytes", 1024, 16 * 1024 * 1024))
    cfg.max_request_bytes = std::size_t(*v);
  if (auto v = r.integer("max_probes_per_request", 1, 4096))
    cfg.max_probes_per_request = std::size_t(*v);
  if (auto v = r.integer("max_concurrent_requests", 1, 1024))
    cfg.max_concurrent_requests = unsigned(*v);
  if (auto v = r.number("max_requests_per_second", 0, 100000, true))
    cfg.max_requests_per_second = *v;
  if (auto v = r.integer("max_concurrent_probes", 1, 65536))
    cfg.max_concurrent_probes = std::size_t(*v);
  read_abs_path(r, "tls_cert", cfg.tls_cert);
  read_abs_path(r, "tls_key", cfg.tls_key);
  if (r.has("tls_cert") != r.has("tls_key"))
    r.error_at_key(r.has("tls_cert") ? "tls_cert" : "tls_key",
                   "agent.tls_cert and agent.tls_key go together (both or neither)");
  if (auto v = r.string("location", 1024)) {
    if (config::detail::valid_name(*v))
      cfg.location.name = *v;
    else
      r.error_at_value("location", "agent.location: " + quote(*v) +
                                       " must be 1..64 characters of A-Z a-z 0-9 _ . -");
  }
  if (auto v = r.string("source_address", 64)) {
    if (config::detail::is_ip(*v))
      cfg.location.source_address = *v;
    else
      r.error_at_value("source_address",
                       "agent.source_address: " + quote(*v) + " is not an IPv4 or IPv6 address");
  }
  if (auto v = r.string("interface", 64)) {
    if (!v->empty() && v->size() <= 15 && v->find_first_of("/: \t") == std::string::npos)
      cfg.location.interface = *v;
    else
      r.error_at_value("interface", "agent.interface: " + quote(*v) +
                                        " is not an interface name (1..15 characters, no "
                                        "'/', ':' or spaces)");
  }
  if (auto v = r.choice("log_level", {"debug", "info", "warn", "error"})) cfg.log_level = *v;
  cfg.location.pos = sink.pos(t->source());
  if (!sink.empty()) throw ConfigException(sink.take());
  return cfg;
}

AgentConfig load_agent_config_file(const std::string& path) {
  auto fail = [&](const std::string& message) {
    throw ConfigException({ConfigError{SourcePos{path, 1, 1}, message}});
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(std::string("cannot open agent config: ") + std::strerror(errno));
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || text.size() + std::size_t(n) > kMaxFileBytes + 1) {
      const int err = errno;
      ::close(fd);
      if (n < 0) fail(std::string("cannot read agent config: ") + std::strerror(err));
      if (n > 0)
        fail("agent config is too large (max " + std::to_string(kMaxFileBytes) + " bytes)");
      break;
    }
    text.append(buf, std::size_t(n));
  }
  return parse_agent_config(text, path);
}

}  // namespace fo::agent
