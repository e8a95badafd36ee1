// Validated, immutable configuration of failoverd (TOML -> Config).
// Every error names file:line:column. Key names are a public contract (docs/config.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/config/step_dns.hpp"
#include "daemon/config/step_postgres.hpp"
#include "daemon/config/step_systemd.hpp"
#include "daemon/config/step_webhook.hpp"
#include "daemon/core/types.hpp"

namespace fo::config {

struct SourcePos {
  std::string file;
  int line = 0;
  int column = 0;
};

struct ConfigError {
  SourcePos pos;
  std::string message;
  std::string to_string() const;  // "file:line:column: message"
};

class ConfigException : public std::runtime_error {
 public:
  explicit ConfigException(std::vector<ConfigError> errors);
  const std::vector<ConfigError>& errors() const { return errors_; }

 private:
  std::vector<ConfigError> errors_;
};

struct DaemonSettings {
  std::string state_db = "/var/lib/failoverd/state.db";
  std::string control_socket = "/run/failoverd/control.sock";
  std::string log_level = "info";  // debug | info | warn | error
  std::size_t store_queue_limit = 10000;
  // Prometheus endpoint: "ADDR:PORT" or "[IPv6]:PORT" (IP literals only); "" disables it.
  std::string metrics_listen = "127.0.0.1:9772";
  // Checks running at once across all groups; more wait in ProbeDispatcher's bounded queue.
  std::size_t max_concurrent_probes = 256;
};

enum class LocationKind { local, agent };

// kind = "agent": a remote `failoverd --agent` that runs the probes (docs/agent-protocol.md).
struct AgentEndpoint {
  std::string url;         // "http://IP:PORT" or "https://IP:PORT", no path
  std::string token_file;  // bearer token; read (and permission-checked) at every request
  std::string ca_file;     // PEM trust anchors for https; "" = the system store
  bool tls_verify = true;
  core::Millis timeout{0};  // 0: the group's round deadline; never more than it
};

struct Location {
  std::string name;
  LocationKind kind = LocationKind::local;
  std::string source_address;  // optional (local only): bind probes to this local address
  std::string interface;       // optional (local only): bind probes to this interface
  SourcePos pos;
  AgentEndpoint agent;  // kind == agent only
};

struct StatusRange {
  int lo = 200;
  int hi = 399;
};

struct HttpProbe {
  std::string url;
  std::string method = "GET";  // GET | HEAD
  std::vector<StatusRange> expect_status{{200, 399}};
  std::string body_contains;
  // ECMAScript std::regex, searched in the first kMaxRegexBody bytes of the body. Validated at
  // load with the same flags the probe uses (see docs/probes.md).
  std::string body_regex;
  std::map<std::string, std::string> headers;
  core::Millis timeout{5000};
  bool tls_verify = true;
  std::string ca_file;
  std::string client_cert;  // PEM file; may hold the key too
  std::string client_key;   // PEM file; only with client_cert
  // IP literal: connect there, keeping the URL's host for Host, SNI and certificate checks.
  std::string resolve;
  std::size_t max_body = 65536;
  // Close with SO_LINGER 0 (an RST instead of a FIN), as HAProxy does for its health checks:
  // no TIME_WAIT socket per check on the prober, at the price of a reset the server may log.
  bool abortive_close = false;
  static constexpr std::size_t kMaxRegexBody = 32 * 1024;
};

// "host:port" split once at load; host is always an IP literal (no name lookups on the loop).
struct Endpoint {
  std::string host;  // "127.0.0.1", "::1" (no brackets)
  int port = 0;
};

struct TcpProbe {
  std::string address;  // as written, for messages
  Endpoint endpoint;
  std::string send;    // written after connecting (may be empty)
  std::string expect;  // must appear in what is read (empty: connecting is enough)
  core::Millis timeout{5000};
  std::size_t max_read = 4096;
};

struct DnsProbe {
  std::string server;             // as written
  Endpoint endpoint;              // port 53 unless given
  std::string name;               // absolute, with the trailing dot
  std::string type = "A";         // A | AAAA | CNAME | TXT | NS | SOA | MX
  std::string expect;             // normalized (addresses canonical, names without dot)
  std::string rcode = "NOERROR";  // NOERROR | NXDOMAIN | SERVFAIL | REFUSED
  core::Millis timeout{5000};
};

struct PostgresProbe {
  std::string conninfo;  // either this ...
  std::string host;      // ... or these (host: IP literal or socket directory)
  int port = 5432;
  std::string dbname = "postgres";
  std::string user = "postgres";
  std::string password_file;        // pgpass format, must not be accessible by group or others
  std::string role;                 // "" (any) | "primary" | "standby"
  std::uint64_t max_lag_bytes = 0;  // 0: not checked
  core::Millis max_lag_time{0};     // 0: not checked
  std::string max_lag;              // as written, for messages
  core::Millis timeout{5000};
};

struct ExecProbe {
  std::vector<std::string> argv;
  core::Millis timeout{5000};
  std::size_t max_output = 4096;
};

struct Probe {
  std::string name;  // unique within the site; default "<kind>#<index>"
  std::string kind;  // "http" | "tcp" | "dns" | "postgres" | "exec"; only that member is set
  HttpProbe http;
  TcpProbe tcp;
  DnsProbe dns;
  PostgresProbe postgres;
  ExecProbe exec;
  SourcePos pos;
};

struct Site {
  std::vector<Probe> probes;
  SourcePos pos;
};

// One step of a phase's plan. `kind` selects which member holds its parameters.
struct Step {
  std::string name;  // default "<kind>#<index>"
  std::string kind;  // "exec" | "check" | "dns" | "postgres" | "systemd" | "webhook"
  // exec
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  // check: a probe that must pass. Check steps run before any step of the plan changes anything.
  Probe check;
  DnsStep dns;
  PostgresStep postgres;
  SystemdStep systemd;
  WebhookStep webhook;
  core::Millis timeout{60000};
  int retries = 0;
  bool abort_on_failure = true;  // on_failure = "abort" | "continue"
  // Run this step's pre-check in the plan's pre-check stage. false for a step whose
  // precondition an earlier step of the same plan establishes (promote after a rewind).
  bool precheck = true;
  SourcePos pos;
};

struct Group {
  std::string name;
  std::vector<std::string> locations;  // resolved: all configured locations if not given
  Site primary;
  Site secondary;
  core::Policy policy;                     // fully resolved (dependent defaults filled in)
  std::array<std::vector<Step>, 4> steps;  // indexed by core::Phase
  SourcePos pos;
  const std::vector<Step>& steps_for(core::Phase p) const { return steps[static_cast<int>(p)]; }
};

struct Config {
  std::string source;  // file name the config came from
  DaemonSettings daemon;
  std::vector<Location> locations;  // at least one (default: one "local" location)
  std::vector<Group> groups;
  const Group* find_group(std::string_view name) const;
  const Location* find_location(std::string_view name) const;
};

// Parse and validate. Throw ConfigException listing every error found (up to a limit).
Config load_config_file(const std::string& path);
Config parse_config(std::string_view text, const std::string& source_name);

}  // namespace fo::config
