// The intent log (see intents.hpp).
#include "daemon/store/intents.hpp"

#include "daemon/store/store.hpp"

namespace fo::store {

IntentLog::IntentLog(const std::string& path) : db_(db::open_writer(path)) {
  std::string err;
  // Durable before begin()/done() return, also across a power loss.
  if (db::exec(db_.get(), "PRAGMA synchronous=FULL", &err) != SQLITE_OK)
    throw StoreError(path + ": cannot set synchronous=FULL for the intent log: " + err);
  sqlite3_busy_timeout(db_.get(), 2000);
}

std::string IntentLog::begin(const Intent& i) {
  std::lock_guard lk(mu_);
  try {
    db::Stmt s(db_.get(),
               "INSERT INTO intents (group_name, plan_id, step_index, idempotency_key, phase, "
               "step_name, kind, term, begun, started_ms) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, ?9) "
               "ON CONFLICT (group_name, plan_id, step_index) DO UPDATE SET "
               "begun = begun + 1, term = excluded.term");
    s.bind(1, std::string_view(i.group));
    s.bind(2, static_cast<int64_t>(i.plan_id));
    s.bind(3, int64_t{i.step_index});
    s.bind(4, std::string_view(i.idempotency_key));
    s.bind(5, std::string_view(i.phase));
    s.bind(6, std::string_view(i.step_name));
    s.bind(7, std::string_view(i.kind));
    s.bind(8, static_cast<int64_t>(i.term));
    s.bind(9, i.started_ms);
    const int rc = s.step();
    if (rc != SQLITE_DONE) return db::describe(db_.get(), rc);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string IntentLog::done(const std::string& group, uint64_t plan_id, int step_index,
                            int64_t done_ms, const std::string& detail) {
  std::lock_guard lk(mu_);
  try {
    db::Stmt s(db_.get(),
               "UPDATE intents SET done_ms = ?4, detail = ?5 "
               "WHERE group_name = ?1 AND plan_id = ?2 AND step_index = ?3");
    s.bind(1, std::string_view(group));
    s.bind(2, static_cast<int64_t>(plan_id));
    s.bind(3, int64_t{step_index});
    s.bind(4, done_ms);
    s.bind(5, std::string_view(detail));
    const int rc = s.step();
    if (rc != SQLITE_DONE) return db::describe(db_.get(), rc);
    if (sqlite3_changes(db_.get()) != 1) return "no intent recorded for this step";
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::vector<Intent> IntentLog::plan(const std::string& group, uint64_t plan_id) {
  std::lock_guard lk(mu_);
  db::Stmt s(db_.get(),
             "SELECT group_name, plan_id, step_index, idempotency_key, phase, step_name, kind, "
             "term, begun, started_ms, done_ms, detail FROM intents "
             "WHERE group_name = ?1 AND plan_id = ?2 ORDER BY step_index LIMIT 1000");
  s.bind(1, std::string_view(group));
  s.bind(2, static_cast<int64_t>(plan_id));
  std::vector<Intent> out;
  for (;;) {
    const int rc = s.step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) throw StoreError("intent log: " + db::describe(db_.get(), rc));
    Intent i;
    i.group = s.text_col(0);
    i.plan_id = static_cast<uint64_t>(s.int_col(1));
    i.step_index = static_cast<int>(s.int_col(2));
    i.idempotency_key = s.text_col(3);
    i.phase = s.text_col(4);
    i.step_name = s.text_col(5);
    i.kind = s.text_col(6);
    i.term = static_cast<uint64_t>(s.int_col(7));
    i.begun = static_cast<int>(s.int_col(8));
    i.started_ms = s.int_col(9);
    i.done_ms = s.int_col(10);
    i.detail = s.text_col(11);
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace fo::store
