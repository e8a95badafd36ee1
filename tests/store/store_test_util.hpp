// Helpers for the store tests: a temp directory, a raw SQLite connection that can hold the
// write lock, and polling with a deadline.
#pragma once

#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "daemon/store/db.hpp"

namespace fo::store::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fo-store-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A second connection to the same database, as another process would have.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    sqlite3* raw = nullptr;
    int rc =
        sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    db_.reset(raw);
    if (rc != SQLITE_OK) throw std::runtime_error("open " + path);
    sqlite3_busy_timeout(db_.get(), 5000);
  }
  void exec(const std::string& sql) {
    std::string err;
    if (db::exec(db_.get(), sql.c_str(), &err) != SQLITE_OK) throw std::runtime_error(err);
  }
  int64_t query_int(const std::string& sql) {
    db::Stmt s(db_.get(), sql);
    if (s.step() != SQLITE_ROW) throw std::runtime_error("no row: " + sql);
    return s.int_col(0);
  }
  std::string query_text(const std::string& sql) {
    db::Stmt s(db_.get(), sql);
    if (s.step() != SQLITE_ROW) throw std::runtime_error("no row: " + sql);
    return s.text_col(0);
  }

 private:
  db::DbPtr db_;
};

// Polls cond every 2 ms until it holds or the deadline passes; returns its last value.
template <class Cond>
bool eventually(Cond cond, std::chrono::milliseconds within = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + within;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

inline constexpr int64_t kForever = INT64_MAX;

}  // namespace fo::store::test
