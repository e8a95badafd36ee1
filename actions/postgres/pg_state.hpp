// What the postgres step knows about one site's database (one query), and the pure decision
// taken from both sites' states: already done, promote (with or without fencing), fence or
// unfence only, or refuse. Shared by apply, the pre-check and reconciliation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "actions/postgres/pg_session.hpp"
#include "daemon/config/step_postgres.hpp"

namespace fo::actions::pg {

// One round trip; columns in SiteState order. WAL functions that do not apply to the role
// give NULL (the CASEs keep pg_current_wal_lsn() from raising on a standby).
extern const char* const kStateQuery;

struct SiteState {
  bool reachable = false;
  bool permanent_error = false;  // authentication, unknown role/database, bad password file
  std::string error;             // why not reachable
  bool in_recovery = false;
  bool read_only = false;                 // default_transaction_read_only
  std::optional<std::uint64_t> current;   // primary: pg_current_wal_lsn()
  std::optional<std::uint64_t> received;  // standby: pg_last_wal_receive_lsn()
  std::optional<std::uint64_t> replayed;  // standby: pg_last_wal_replay_lsn()
  std::optional<std::uint32_t> timeline;  // primary: its current timeline
  std::string system_id;                  // pg_control_system()
  std::string receiver_status;            // standby: pg_stat_wal_receiver.status, "" if none
  std::optional<std::uint32_t> received_tli;
  std::optional<double> replay_age;  // standby: seconds since the last replayed commit
  bool replay_paused = false;

  bool primary() const { return reachable && !in_recovery; }
  bool writable() const { return primary() && !read_only; }
  // "unreachable (connection refused)", "a standby", "read-only", "writable"
  std::string describe() const;
};

// Parses a kStateQuery reply; a malformed one gives an unreachable state saying so.
SiteState parse_state(const Reply& reply);

struct Lag {
  bool known = false;
  std::uint64_t bytes = 0;
  double seconds = 0;
  std::string text;  // "2 MB", "3.0 s", or why it is unknown
};

// The target standby's lag: against the other site's current WAL position when that is a
// reachable primary, otherwise what it received but has not replayed.
Lag standby_lag(const SiteState& target, const SiteState& other, bool time_based);

enum class Plan { refuse, already_done, fence_other, unfence_target, promote };

struct Decision {
  Plan plan = Plan::refuse;
  bool retryable = false;  // for refuse
  bool fence = false;      // promote: fence the other site first (it is a reachable primary)
  bool catch_up = false;   // promote: wait for the other site's final WAL position
  std::string detail;      // why (refuse) or what was found (the others)
  std::string notes;       // "forced past the lag gate (...)", "primary unreachable: not fenced"
};

// target_name/other_name: "primary" / "secondary".
Decision decide(const SiteState& target, const SiteState& other, const config::PostgresStep& step,
                bool forced, const std::string& target_name, const std::string& other_name);

// Reconciliation verdict: "" when exactly one database is writable and it is the target's,
// otherwise what differs.
std::string drift(const SiteState& target, const SiteState& other, const std::string& target_name,
                  const std::string& other_name);

std::string format_lsn(std::uint64_t lsn);  // "0/3000060"

}  // namespace fo::actions::pg
