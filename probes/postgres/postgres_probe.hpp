// PostgreSQL probe: libpq's asynchronous connect and query driven by the loop, one fresh
// connection per check. Checks that the server answers, optionally its role (primary or
// standby, from pg_is_in_recovery()) and a standby's replay lag in bytes or time.
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <string>

#include "probes/check_table.hpp"
#include "probes/plugin.hpp"

namespace fo::probes {

class PostgresPlugin final : public ProbePlugin {
 public:
  explicit PostgresPlugin(sd_event* event);
  ~PostgresPlugin() override;  // closes the sockets of checks in flight, drops their callbacks
  void start(const config::Probe& probe, const config::Location& from,
             std::function<void(ProbeResult)> done) override;

 private:
  struct Check;
  void on_io(uint64_t id, uint32_t revents);
  void on_timeout(uint64_t id);
  void watch(uint64_t id, uint32_t events);
  void send_query(uint64_t id);
  void read_results(uint64_t id);

  sd_event* event_;
  CheckTable<Check> checks_;
};

// Helpers exposed for tests.
std::string format_bytes(std::uint64_t bytes);  // "512 B", "40 kB", "16 MB", "1.5 GB"
// First line of a libpq error without the "connection to server at ... failed: " preamble;
// "connection refused" for a refused connection.
std::string describe_pq_error(const std::string& message);
// "" or why the password file may not be used (missing, or readable by group/others).
std::string password_file_problem(const std::string& path);

}  // namespace fo::probes
