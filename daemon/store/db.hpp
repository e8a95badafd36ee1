// Thin RAII layer over the SQLite C API for the store: connections, prepared statements,
// and the versioned schema (migrations keyed on PRAGMA user_version).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace fo::store::db {

struct CloseDb {
  void operator()(sqlite3* d) const { sqlite3_close_v2(d); }
};
using DbPtr = std::unique_ptr<sqlite3, CloseDb>;

struct FinalizeStmt {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};

// Newest schema this code knows; a database with a higher user_version is refused.
int schema_version();

// Cuts text to max bytes without splitting a UTF-8 sequence.
std::string_view clip_utf8(std::string_view text, size_t max);

// "database is locked (SQLITE_BUSY)" style text for a result code on a connection.
std::string describe(sqlite3* db, int rc);

// Prepared statement. Binding and stepping report SQLite result codes (the writer retries on
// errors); only preparation throws.
class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql);  // throws StoreError
  // Binds with 1-based indexes. Text is clipped to kMaxTextBytes unless clip is false; the
  // bound text must outlive the step (SQLITE_STATIC).
  void bind(int idx, int64_t v);
  void bind(int idx, std::string_view text, bool clip = true);
  void bind(int idx, std::optional<uint32_t> v);
  int step();    // SQLITE_ROW, SQLITE_DONE or an error code
  void reset();  // reset and clear bindings so the statement can be reused

  int64_t int_col(int col) const;
  std::string text_col(int col) const;
  bool null_col(int col) const;

 private:
  sqlite3* db_;
  std::unique_ptr<sqlite3_stmt, FinalizeStmt> stmt_;
};

// Runs statements without results; returns the SQLite result code and fills *err on failure.
int exec(sqlite3* db, const char* sql, std::string* err);

// Opens the writer connection: checks the directory, sets WAL/NORMAL/busy 1 s/foreign keys,
// refuses a newer schema and applies pending migrations, each in its own transaction.
// Throws StoreError naming the path.
DbPtr open_writer(const std::string& path);
// Opens a read-only connection with a 1 s busy timeout. Throws StoreError.
DbPtr open_reader(const std::string& path);

}  // namespace fo::store::db
