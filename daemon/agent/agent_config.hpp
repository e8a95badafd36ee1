// Configuration of `failoverd --agent` (a remote probe agent): its own small TOML file with one
// [agent] table, validated with the same helpers and file:line:column errors as failoverd.toml.
// Key names are a public contract (docs/agent-protocol.md).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "daemon/config/config.hpp"

namespace fo::agent {

struct AgentConfig {
  std::string source;       // file the config came from
  std::string listen;       // "IP:PORT" or "[v6]:PORT"
  std::string token_file;   // bearer token the daemon must present
  bool allow_exec = false;  // run exec probes sent by the daemon
  std::size_t max_request_bytes = 64 * 1024;
  std::size_t max_probes_per_request = 256;
  unsigned max_concurrent_requests = 8;
  double max_requests_per_second = 20;  // token bucket; burst = max(1, rate)
  std::size_t max_concurrent_probes = 256;
  std::string tls_cert;  // PEM; with tls_key: serve HTTPS
  std::string tls_key;
  // The location the agent probes from: its name (FAILOVER_LOCATION for exec probes) and
  // optional source address / interface, as for a local [[location]] of failoverd.
  config::Location location;
  std::string log_level = "info";
};

// Parse and validate; throw config::ConfigException listing every error.
AgentConfig parse_agent_config(std::string_view text, const std::string& source_name);
AgentConfig load_agent_config_file(const std::string& path);

}  // namespace fo::agent
