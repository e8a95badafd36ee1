// Config of a `postgres` step: fence the old primary, gate on replication lag, promote the
// target site's standby and verify it (see docs/steps/postgres.md).
#pragma once

#include <cstdint>
#include <string>

#include "daemon/core/types.hpp"

namespace fo::config {

// How the daemon reaches one site's database: a conninfo string, or host/port/dbname/user.
// Hosts are IP literals or socket directories (a name lookup would block the loop).
struct PostgresTarget {
  std::string conninfo;  // key=value form only; no password, no host names
  std::string host;
  int port = 5432;
  std::string dbname = "postgres";
  std::string user = "postgres";
  // The password alone (one line), in a file nobody but the daemon's user may access.
  std::string password_file;
  bool configured = false;
};

struct PostgresStep {
  std::string action = "promote";  // the only action so far
  PostgresTarget primary;
  PostgresTarget secondary;
  std::string fence = "read_only";  // "read_only" | "none"
  // Replication lag the target standby may have and still be promoted automatically: bytes
  // (max_lag_bytes > 0) or time (max_lag_time > 0), exactly one of them.
  std::uint64_t max_lag_bytes = 16 * 1024 * 1024;
  core::Millis max_lag_time{0};
  std::string max_lag = "16MB";  // as written, for messages
  // Bounds each connection attempt, so an unreachable old primary does not use up the step.
  core::Millis connect_timeout{5000};
};

}  // namespace fo::config
