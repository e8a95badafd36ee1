// Validated, immutable configuration of failoverd (TOML -> Config).
// Every error names file:line:column. Key names are a public contract (docs/config.md).
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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
};

enum class LocationKind { local };

struct Location {
  std::string name;
  LocationKind kind = LocationKind::local;
  std::string source_address;  // optional: bind probes to this local address
  std::string interface;       // optional: bind probes to this interface
  SourcePos pos;
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
  std::map<std::string, std::string> headers;
  core::Millis timeout{5000};
  bool tls_verify = true;
  std::string ca_file;
  std::size_t max_body = 65536;
};

struct Probe {
  std::string name;  // unique within the site; default "<kind>#<index>"
  std::string kind;  // "http"
  HttpProbe http;
  SourcePos pos;
};

struct Site {
  std::vector<Probe> probes;
  SourcePos pos;
};

struct Step {
  std::string name;  // default "<kind>#<index>"
  std::string kind;  // "exec"
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  core::Millis timeout{60000};
  int retries = 0;
  bool abort_on_failure = true;  // on_failure = "abort" | "continue"
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
