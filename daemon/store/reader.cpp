// Read side of the store: history queries and the engine state load at start-up.
#include "daemon/store/reader.hpp"

#include <optional>

namespace fo::store {
namespace {

constexpr const char* kTransitionCols =
    "SELECT ts_ms, group_name, from_state, to_state, reason, initiator, uid, term, active "
    "FROM transitions";
constexpr const char* kActionCols =
    "SELECT group_name, plan_id, phase, step_index, step_name, kind, attempt, started_ms, "
    "ended_ms, result, exit_code, output, initiator, term, stage, detail FROM action_steps";
constexpr const char* kRoundCols =
    "SELECT ts_ms, group_name, state, p_healthy, p_reporting, p_configured, p_known, s_healthy, "
    "s_reporting, s_configured, s_known, p_locations, s_locations FROM rounds";
constexpr const char* kCommandCols =
    "SELECT ts_ms, group_name, command, uid, arguments, result FROM commands";
constexpr const char* kGapCols =
    "SELECT ts_ms, group_name, dropped, first_ts_ms, last_ts_ms FROM round_gaps";

int64_t clamp_limit(size_t limit) {
  return static_cast<int64_t>(limit == 0 || limit > kMaxReadRows ? kMaxReadRows : limit);
}

std::optional<uint32_t> uid_col(const db::Stmt& s, int col) {
  if (s.null_col(col)) return std::nullopt;
  return static_cast<uint32_t>(s.int_col(col));
}

int int_col(const db::Stmt& s, int col) {
  return static_cast<int>(s.int_col(col));
}

// "<select> WHERE <range> [AND group_name = ?4] ORDER BY <order> LIMIT ?3" with ?1 = since,
// ?2 = until; one statement per shape keeps the (group_name, ts) indexes usable.
std::string filtered(const char* select, const std::string& range, const std::string& group,
                     const char* order) {
  std::string sql = std::string(select) + " WHERE " + range;
  if (!group.empty()) sql += " AND group_name = ?4";
  return sql + " ORDER BY " + order + " LIMIT ?3";
}

void bind_filter(db::Stmt& s, const std::string& group, int64_t since_ms, int64_t until_ms,
                 size_t limit) {
  s.bind(1, since_ms);
  s.bind(2, until_ms);
  s.bind(3, clamp_limit(limit));
  if (!group.empty()) s.bind(4, std::string_view(group));
}

template <class Row, class Fn>
std::vector<Row> collect(sqlite3* db, db::Stmt& s, Fn&& row) {
  std::vector<Row> out;
  for (;;) {
    int rc = s.step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) throw StoreError("store: read failed: " + db::describe(db, rc));
    out.push_back(row(s));
  }
}

TransitionRecord transition_row(const db::Stmt& s) {
  TransitionRecord r;
  r.ts_ms = s.int_col(0);
  r.group = s.text_col(1);
  r.from = s.text_col(2);
  r.to = s.text_col(3);
  r.reason = s.text_col(4);
  r.initiator = s.text_col(5);
  r.uid = uid_col(s, 6);
  r.term = static_cast<uint64_t>(s.int_col(7));
  r.active = s.text_col(8);
  return r;
}

ActionRecord action_row(const db::Stmt& s) {
  ActionRecord r;
  r.group = s.text_col(0);
  r.plan_id = static_cast<uint64_t>(s.int_col(1));
  r.phase = s.text_col(2);
  r.step_index = int_col(s, 3);
  r.step_name = s.text_col(4);
  r.kind = s.text_col(5);
  r.attempt = int_col(s, 6);
  r.started_ms = s.int_col(7);
  r.ended_ms = s.int_col(8);
  r.result = s.text_col(9);
  r.exit_code = int_col(s, 10);
  r.output = s.text_col(11);
  r.initiator = s.text_col(12);
  r.term = static_cast<uint64_t>(s.int_col(13));
  r.stage = s.text_col(14);
  r.detail = s.text_col(15);
  return r;
}

RoundRecord round_row(const db::Stmt& s) {
  RoundRecord r;
  r.ts_ms = s.int_col(0);
  r.group = s.text_col(1);
  r.state = s.text_col(2);
  r.p_healthy = int_col(s, 3);
  r.p_reporting = int_col(s, 4);
  r.p_configured = int_col(s, 5);
  r.p_known = s.int_col(6) != 0;
  r.s_healthy = int_col(s, 7);
  r.s_reporting = int_col(s, 8);
  r.s_configured = int_col(s, 9);
  r.s_known = s.int_col(10) != 0;
  r.p_locations = s.text_col(11);
  r.s_locations = s.text_col(12);
  return r;
}

CommandRecord command_row(const db::Stmt& s) {
  CommandRecord r;
  r.ts_ms = s.int_col(0);
  r.group = s.text_col(1);
  r.command = s.text_col(2);
  r.uid = uid_col(s, 3);
  r.arguments = s.text_col(4);
  r.result = s.text_col(5);
  return r;
}

GapRecord gap_row(const db::Stmt& s) {
  GapRecord r;
  r.ts_ms = s.int_col(0);
  r.group = s.text_col(1);
  r.dropped = static_cast<uint64_t>(s.int_col(2));
  r.first_ms = s.int_col(3);
  r.last_ms = s.int_col(4);
  return r;
}

}  // namespace

Reader::Reader(const std::string& path) : db_(db::open_reader(path)) {}

std::map<std::string, std::string> Reader::load_group_states() {
  std::lock_guard lk(mu_);
  db::Stmt s(db_.get(), "SELECT group_name, blob FROM group_state ORDER BY group_name");
  std::map<std::string, std::string> out;
  for (;;) {
    int rc = s.step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) throw StoreError("store: read failed: " + db::describe(db_.get(), rc));
    out.emplace(s.text_col(0), s.text_col(1));
  }
}

std::vector<TransitionRecord> Reader::transitions(const std::string& group, int64_t since_ms,
                                                  int64_t until_ms, size_t limit) {
  std::lock_guard lk(mu_);
  db::Stmt s(db_.get(),
             filtered(kTransitionCols, "ts_ms >= ?1 AND ts_ms < ?2", group, "ts_ms DESC, id DESC"));
  bind_filter(s, group, since_ms, until_ms, limit);
  return collect<TransitionRecord>(db_.get(), s, transition_row);
}

std::vector<ActionRecord> Reader::actions(const std::string& group, int64_t since_ms,
                                          int64_t until_ms, size_t limit) {
  std::lock_guard lk(mu_);
  db::Stmt s(db_.get(), filtered(kActionCols, "started_ms >= ?1 AND started_ms < ?2", group,
                                 "started_ms DESC, id DESC"));
  bind_filter(s, group, since_ms, until_ms, limit);
  return collect<ActionRecord>(db_.get(), s, action_row);
}

std::vector<CommandRecord> Reader::commands(const std::string& group, int64_t since_ms,
                                            int64_t until_ms, size_t limit) {
  std::lock_guard lk(mu_);
  db::Stmt s(db_.get(),
             filtered(kCommandCols, "ts_ms >= ?1 AND ts_ms < ?2", group, "ts_ms DESC, id DESC"));
  bind_filter(s, group, since_ms, until_ms, limit);
  return collect<CommandRecord>(db_.get(), s, command_row);
}

std::vector<RoundRecord> Reader::rounds(const std::string& group, int64_t since_ms,
                                        int64_t until_ms, size_t limit) {
  std::lock_guard lk(mu_);
  db::Stmt s(db_.get(),
             filtered(kRoundCols, "ts_ms >= ?1 AND ts_ms < ?2", group, "ts_ms ASC, id ASC"));
  bind_filter(s, group, since_ms, until_ms, limit);
  return collect<RoundRecord>(db_.get(), s, round_row);
}

std::vector<GapRecord> Reader::gaps(const std::string& group, int64_t since_ms, int64_t until_ms,
                                    size_t limit) {
  std::lock_guard lk(mu_);
  db::Stmt s(db_.get(), filtered(kGapCols, "last_ts_ms >= ?1 AND first_ts_ms < ?2", group,
                                 "first_ts_ms ASC, id ASC"));
  bind_filter(s, group, since_ms, until_ms, limit);
  return collect<GapRecord>(db_.get(), s, gap_row);
}

std::vector<ActionRecord> Reader::plan_steps(const std::string& group, uint64_t plan_id) {
  std::lock_guard lk(mu_);
  db::Stmt s(db_.get(),
             std::string(kActionCols) +
                 " WHERE group_name = ?1 AND plan_id = ?2 "
                 "ORDER BY started_ms ASC, step_index ASC, attempt ASC, id ASC LIMIT ?3");
  s.bind(1, std::string_view(group));
  s.bind(2, static_cast<int64_t>(plan_id));
  s.bind(3, clamp_limit(0));
  return collect<ActionRecord>(db_.get(), s, action_row);
}

}  // namespace fo::store
