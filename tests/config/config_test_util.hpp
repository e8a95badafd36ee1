// Shared helpers of the config loader tests.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "daemon/config/config.hpp"

namespace fo::config::test {

// The smallest valid configuration: one group, one probe per site.
inline constexpr std::string_view kMinimal = R"([[group]]
name = "shop"
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.10/health" } ]
[group.secondary]
probes = [ { kind = "http", url = "https://198.51.100.20/health" } ]
)";

// Like kMinimal, but the secondary's probe is a [[group.secondary.probes]] table (lines 5-7),
// so tests can append further probe tables.
inline constexpr std::string_view kMinimalLong = R"([[group]]
name = "shop"
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.10/health" } ]
[[group.secondary.probes]]
kind = "http"
url = "https://198.51.100.20/health"
)";

// what() of the ConfigException thrown for `text`, or "OK" if it parses.
inline std::string errors_of(std::string_view text, const std::string& name = "t.toml") {
  try {
    (void)parse_config(text, name);
  } catch (const ConfigException& e) {
    return e.what();
  }
  return "OK";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace fo::config::test
