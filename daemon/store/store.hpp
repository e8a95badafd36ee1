// failoverd's SQLite store: history (transitions, round summaries, action steps, operator
// commands) and the persisted engine state per group. Writes never block the caller: they go
// through a bounded queue to a writer thread. Reads are synchronous on their own connection.
// Schema and units: docs/store.md (all times are milliseconds since the Unix epoch).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fo::store {

// Start-up and read failures (missing directory, not a database, schema too new, query error).
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TransitionRecord {
  int64_t ts_ms = 0;
  std::string group, from, to, reason;
  std::string initiator;  // "auto" | "operator"
  std::optional<uint32_t> uid;
  uint64_t term = 0;
  std::string active;  // "primary" | "secondary": the site serving after the transition

  bool operator==(const TransitionRecord&) const = default;
};

struct RoundRecord {
  int64_t ts_ms = 0;
  std::string group, state;
  int p_healthy = 0, p_reporting = 0, p_configured = 0;
  bool p_known = false;
  int s_healthy = 0, s_reporting = 0, s_configured = 0;
  bool s_known = false;
  // Compact per-location verdicts: "ams=h,fra=u,nyc=m" (h healthy, u unhealthy, m missing).
  std::string p_locations, s_locations;

  bool operator==(const RoundRecord&) const = default;
};

struct ActionRecord {
  std::string group;
  uint64_t plan_id = 0;
  std::string phase;
  std::string stage = "apply";  // "check" (pre-check, changed nothing) | "apply"
  int step_index = 0;
  std::string step_name, kind;
  int attempt = 0;
  int64_t started_ms = 0, ended_ms = 0;  // ended_ms 0 = still running
  std::string result;                    // "running" | "ok" | "failed" | "timeout" | "skipped"
  int exit_code = 0;
  std::string output;  // excerpt; stored truncated to kMaxTextBytes
  std::string initiator;
  uint64_t term = 0;
  std::string detail;  // one line from the step kind ("3/3 servers answer ...")

  bool operator==(const ActionRecord&) const = default;
};

struct CommandRecord {
  int64_t ts_ms = 0;
  std::string group, command;
  std::optional<uint32_t> uid;
  std::string arguments, result;

  bool operator==(const CommandRecord&) const = default;
};

// Marker for round summaries dropped on queue overflow, so history shows the hole.
struct GapRecord {
  int64_t ts_ms = 0;  // when the marker was written
  std::string group;
  uint64_t dropped = 0;
  int64_t first_ms = 0, last_ms = 0;  // ts_ms range of the dropped rounds

  bool operator==(const GapRecord&) const = default;
};

struct StoreStats {
  size_t queue_depth = 0;  // queued + being written
  uint64_t written = 0;    // records committed (a coalesced state save counts once)
  uint64_t write_errors = 0;
  uint64_t dropped_rounds = 0;
};

// Free-text fields (reason, output, arguments, result, locations, ...) are stored cut to this
// many bytes at a UTF-8 boundary. The group state blob is never cut.
inline constexpr size_t kMaxTextBytes = 4096;
// Reads return at most this many rows; limit 0 means this.
inline constexpr size_t kMaxReadRows = 100000;

class Writer;
class Reader;

class Store {
 public:
  // Opens (creates) the database in an existing directory and applies migrations synchronously.
  // Throws StoreError with a clear message on failure.
  static std::unique_ptr<Store> open(const std::string& path, size_t queue_limit = 10000);
  // Drains the queue with a bounded wait (2 s); logs anything left unwritten by count.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Non-blocking: enqueue and return at once. Thread-safe.
  void record_transition(TransitionRecord r);
  void record_round(RoundRecord r);
  // Upsert on (group, plan_id, phase, step_index, attempt): a "running" row later becomes final.
  void record_action(ActionRecord r);
  void record_command(CommandRecord r);
  // Upsert; replaces a still-queued save of the same group instead of queueing a second one.
  void save_group_state(const std::string& group, std::string blob, int64_t ts_ms);

  // Waits until everything enqueued before the call is committed; false on timeout.
  bool flush(std::chrono::milliseconds timeout);
  StoreStats stats() const;

  // Reads: synchronous, read-only connection, 1 s busy timeout; throw StoreError on failure.
  // Time filters are half-open: since_ms <= ts < until_ms. group "" = all groups.
  std::map<std::string, std::string> load_group_states();
  // Newest first.
  std::vector<TransitionRecord> transitions(const std::string& group, int64_t since_ms,
                                            int64_t until_ms, size_t limit);
  // Newest first, by started_ms.
  std::vector<ActionRecord> actions(const std::string& group, int64_t since_ms, int64_t until_ms,
                                    size_t limit);
  // Newest first.
  std::vector<CommandRecord> commands(const std::string& group, int64_t since_ms, int64_t until_ms,
                                      size_t limit);
  // OLDEST first (for replay): the first `limit` rounds at or after since_ms.
  std::vector<RoundRecord> rounds(const std::string& group, int64_t since_ms, int64_t until_ms,
                                  size_t limit);
  // Oldest first: gap markers whose dropped range overlaps [since_ms, until_ms).
  std::vector<GapRecord> gaps(const std::string& group, int64_t since_ms, int64_t until_ms,
                              size_t limit);
  // All steps and attempts of one plan, in execution order.
  std::vector<ActionRecord> plan_steps(const std::string& group, uint64_t plan_id);

 private:
  Store(std::unique_ptr<Writer> writer, std::unique_ptr<Reader> reader);
  std::unique_ptr<Writer> writer_;
  std::unique_ptr<Reader> reader_;
};

}  // namespace fo::store
