// SQLite plumbing for the store: RAII handles, connection set-up and schema migrations.
#include "daemon/store/db.hpp"

#include <filesystem>
#include <system_error>

#include "daemon/store/store.hpp"

namespace fo::store::db {
namespace {

// Migration steps, applied in order. Never edit a released step: append a new one.
// Column "group" is a keyword in SQL, hence group_name; times are ms since the Unix epoch.
struct Migration {
  int version;
  const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE transitions (
  id INTEGER PRIMARY KEY,
  ts_ms INTEGER NOT NULL,
  group_name TEXT NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  initiator TEXT NOT NULL,
  uid INTEGER,
  term INTEGER NOT NULL
);
CREATE INDEX transitions_group_ts ON transitions(group_name, ts_ms);
CREATE INDEX transitions_ts ON transitions(ts_ms);

CREATE TABLE rounds (
  id INTEGER PRIMARY KEY,
  ts_ms INTEGER NOT NULL,
  group_name TEXT NOT NULL,
  state TEXT NOT NULL,
  p_healthy INTEGER NOT NULL,
  p_reporting INTEGER NOT NULL,
  p_configured INTEGER NOT NULL,
  p_known INTEGER NOT NULL,
  s_healthy INTEGER NOT NULL,
  s_reporting INTEGER NOT NULL,
  s_configured INTEGER NOT NULL,
  s_known INTEGER NOT NULL,
  p_locations TEXT NOT NULL,
  s_locations TEXT NOT NULL
);
CREATE INDEX rounds_group_ts ON rounds(group_name, ts_ms);
CREATE INDEX rounds_ts ON rounds(ts_ms);

CREATE TABLE round_gaps (
  id INTEGER PRIMARY KEY,
  ts_ms INTEGER NOT NULL,
  group_name TEXT NOT NULL,
  dropped INTEGER NOT NULL,
  first_ts_ms INTEGER NOT NULL,
  last_ts_ms INTEGER NOT NULL
);
CREATE INDEX round_gaps_group_ts ON round_gaps(group_name, first_ts_ms);

CREATE TABLE action_steps (
  id INTEGER PRIMARY KEY,
  group_name TEXT NOT NULL,
  plan_id INTEGER NOT NULL,
  phase TEXT NOT NULL,
  step_index INTEGER NOT NULL,
  step_name TEXT NOT NULL,
  kind TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL,
  result TEXT NOT NULL,
  exit_code INTEGER NOT NULL,
  output TEXT NOT NULL,
  initiator TEXT NOT NULL,
  term INTEGER NOT NULL,
  UNIQUE (group_name, plan_id, phase, step_index, attempt)
);
CREATE INDEX action_steps_group_ts ON action_steps(group_name, started_ms);
CREATE INDEX action_steps_ts ON action_steps(started_ms);

CREATE TABLE commands (
  id INTEGER PRIMARY KEY,
  ts_ms INTEGER NOT NULL,
  group_name TEXT NOT NULL,
  command TEXT NOT NULL,
  uid INTEGER,
  arguments TEXT NOT NULL,
  result TEXT NOT NULL
);
CREATE INDEX commands_group_ts ON commands(group_name, ts_ms);
CREATE INDEX commands_ts ON commands(ts_ms);

CREATE TABLE group_state (
  group_name TEXT PRIMARY KEY,
  blob TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
)sql"},
    // 2: the site serving traffic after each transition ("" for rows written before).
    {2, R"sql(
ALTER TABLE transitions ADD COLUMN active TEXT NOT NULL DEFAULT '';
)sql"},
    // 3: pre-check rows beside apply rows (stage joins the key), and the synchronous intent log.
    {3, R"sql(
CREATE TABLE action_steps_v3 (
  id INTEGER PRIMARY KEY,
  group_name TEXT NOT NULL,
  plan_id INTEGER NOT NULL,
  phase TEXT NOT NULL,
  stage TEXT NOT NULL DEFAULT 'apply',
  step_index INTEGER NOT NULL,
  step_name TEXT NOT NULL,
  kind TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL,
  result TEXT NOT NULL,
  exit_code INTEGER NOT NULL,
  output TEXT NOT NULL,
  initiator TEXT NOT NULL,
  term INTEGER NOT NULL,
  detail TEXT NOT NULL DEFAULT '',
  UNIQUE (group_name, plan_id, phase, stage, step_index, attempt)
);
INSERT INTO action_steps_v3 (id, group_name, plan_id, phase, step_index, step_name, kind, attempt,
                             started_ms, ended_ms, result, exit_code, output, initiator, term)
  SELECT id, group_name, plan_id, phase, step_index, step_name, kind, attempt, started_ms,
         ended_ms, result, exit_code, output, initiator, term FROM action_steps;
DROP TABLE action_steps;
ALTER TABLE action_steps_v3 RENAME TO action_steps;
CREATE INDEX action_steps_group_ts ON action_steps(group_name, started_ms);
CREATE INDEX action_steps_ts ON action_steps(started_ms);

CREATE TABLE intents (
  group_name TEXT NOT NULL,
  plan_id INTEGER NOT NULL,
  step_index INTEGER NOT NULL,
  idempotency_key TEXT NOT NULL,
  phase TEXT NOT NULL,
  step_name TEXT NOT NULL,
  kind TEXT NOT NULL,
  term INTEGER NOT NULL,
  begun INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  done_ms INTEGER NOT NULL DEFAULT 0,
  detail TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (group_name, plan_id, step_index)
);
)sql"},
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw StoreError("store: database " + path + ": " + what);
}

void exec_or_throw(sqlite3* db, const std::string& path, const char* sql, const char* what) {
  std::string err;
  if (exec(db, sql, &err) != SQLITE_OK) fail(path, std::string(what) + ": " + err);
}

int query_int(sqlite3* db, const std::string& path, const char* sql) {
  Stmt s(db, sql);
  int rc = s.step();
  if (rc != SQLITE_ROW) fail(path, std::string(sql) + ": " + describe(db, rc));
  return static_cast<int>(s.int_col(0));
}

void check_directory(const std::string& path) {
  if (path.empty()) throw StoreError("store: empty database path");
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  auto st = std::filesystem::status(dir, ec);
  if (ec || !std::filesystem::exists(st)) {
    fail(path, "directory " + dir.string() + " does not exist (it is not created automatically)");
  }
  if (!std::filesystem::is_directory(st)) fail(path, dir.string() + " is not a directory");
  if (std::filesystem::is_directory(std::filesystem::status(path, ec))) {
    fail(path, "path is a directory, expected a database file");
  }
}

DbPtr open_handle(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  DbPtr db(raw);  // close even when open failed: SQLite may hand back a handle with the error
  if (rc != SQLITE_OK) fail(path, "cannot open: " + describe(db.get(), rc));
  sqlite3_extended_result_codes(db.get(), 1);
  return db;
}

void migrate(sqlite3* db, const std::string& path) {
  int current = query_int(db, path, "PRAGMA user_version");
  if (current > schema_version()) {
    fail(path, "schema version " + std::to_string(current) +
                   " is newer than this failoverd supports (" + std::to_string(schema_version()) +
                   "); run a newer failoverd or move the database aside");
  }
  for (const auto& m : kMigrations) {
    if (m.version <= current) continue;
    // IMMEDIATE takes the write lock first, so two daemons racing on one file cannot both
    // apply the same step.
    exec_or_throw(db, path, "BEGIN IMMEDIATE", "cannot start migration");
    // Another process may have migrated between our read and the lock.
    if (query_int(db, path, "PRAGMA user_version") >= m.version) {
      exec_or_throw(db, path, "COMMIT", "cannot end migration");
      continue;
    }
    std::string err;
    std::string sql =
        std::string(m.sql) + "\nPRAGMA user_version = " + std::to_string(m.version) + ";";
    if (exec(db, sql.c_str(), &err) != SQLITE_OK) {
      exec(db, "ROLLBACK", nullptr);
      fail(path, "migration to schema version " + std::to_string(m.version) + " failed: " + err);
    }
    exec_or_throw(db, path, "COMMIT", "cannot commit migration");
  }
}

}  // namespace

int schema_version() {
  return kMigrations[std::size(kMigrations) - 1].version;
}

std::string_view clip_utf8(std::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t n = max;
  // Back up over continuation bytes (10xxxxxx) so the cut lands on a character start.
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

std::string describe(sqlite3* db, int rc) {
  std::string text = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return text + " (" + sqlite3_errstr(rc) + ", code " + std::to_string(rc) + ")";
}

Stmt::Stmt(sqlite3* db, std::string_view sql) : db_(db) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  stmt_.reset(raw);
  if (rc != SQLITE_OK) {
    throw StoreError("store: cannot prepare statement: " + describe(db, rc));
  }
}

void Stmt::bind(int idx, int64_t v) {
  sqlite3_bind_int64(stmt_.get(), idx, v);
}

void Stmt::bind(int idx, std::string_view text, bool clip) {
  if (clip) text = clip_utf8(text, kMaxTextBytes);
  sqlite3_bind_text64(stmt_.get(), idx, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8);
}

void Stmt::bind(int idx, std::optional<uint32_t> v) {
  if (v) {
    sqlite3_bind_int64(stmt_.get(), idx, *v);
  } else {
    sqlite3_bind_null(stmt_.get(), idx);
  }
}

int Stmt::step() {
  return sqlite3_step(stmt_.get());
}

void Stmt::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

int64_t Stmt::int_col(int col) const {
  return sqlite3_column_int64(stmt_.get(), col);
}

std::string Stmt::text_col(int col) const {
  const auto* p = sqlite3_column_text(stmt_.get(), col);
  int n = sqlite3_column_bytes(stmt_.get(), col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

bool Stmt::null_col(int col) const {
  return sqlite3_column_type(stmt_.get(), col) == SQLITE_NULL;
}

int exec(sqlite3* db, const char* sql, std::string* err) {
  char* msg = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &msg);
  if (rc != SQLITE_OK && err) {
    *err = std::string(msg ? msg : sqlite3_errstr(rc)) + " (" + sqlite3_errstr(rc) + ", code " +
           std::to_string(rc) + ")";
  }
  sqlite3_free(msg);
  return rc;
}

DbPtr open_writer(const std::string& path) {
  check_directory(path);
  DbPtr db = open_handle(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
  sqlite3_busy_timeout(db.get(), 1000);
  // The first read of the header: a file that is not SQLite fails here, before anything
  // could write to it.
  std::string err;
  int rc = exec(db.get(), "SELECT count(*) FROM sqlite_schema", &err);
  if ((rc & 0xff) == SQLITE_NOTADB) fail(path, "file exists but is not an SQLite database");
  if (rc != SQLITE_OK) fail(path, "cannot read: " + err);
  Stmt wal(db.get(), "PRAGMA journal_mode=WAL");
  rc = wal.step();
  if (rc != SQLITE_ROW) fail(path, "cannot enable WAL: " + describe(db.get(), rc));
  std::string mode = wal.text_col(0);
  if (mode != "wal") fail(path, "journal_mode is '" + mode + "', WAL could not be enabled");
  wal.reset();
  exec_or_throw(db.get(), path, "PRAGMA synchronous=NORMAL", "cannot set synchronous");
  exec_or_throw(db.get(), path, "PRAGMA foreign_keys=ON", "cannot enable foreign keys");
  migrate(db.get(), path);
  return db;
}

DbPtr open_reader(const std::string& path) {
  DbPtr db = open_handle(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
  sqlite3_busy_timeout(db.get(), 1000);
  int version = query_int(db.get(), path, "PRAGMA user_version");
  if (version != schema_version()) {
    fail(path, "read connection sees schema version " + std::to_string(version) + ", expected " +
                   std::to_string(schema_version()));
  }
  return db;
}

}  // namespace fo::store::db
