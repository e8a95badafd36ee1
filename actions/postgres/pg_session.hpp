// One PostgreSQL connection driven by the sd-event loop through libpq's asynchronous API:
// a non-blocking connect, then one query at a time. Replies are bounded (rows, value sizes)
// and every phase has its own deadline. Destroying the session closes the connection and
// drops any pending callback.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/core/types.hpp"

typedef struct pg_conn PGconn;

namespace fo::actions::pg {

inline constexpr std::size_t kMaxRows = 64;
inline constexpr std::size_t kMaxValueBytes = 1024;
inline constexpr std::size_t kMaxErrorText = 200;

// libpq connection keywords and values; a "dbname" holding a whole conninfo string is
// expanded (expand_dbname).
struct ConnectParams {
  std::vector<std::pair<std::string, std::string>> keywords;
  bool expand_dbname = false;
};

struct ConnectResult {
  bool ok = false;
  // Authentication failed, role or database unknown, or refused by pg_hba.conf: another
  // attempt cannot help.
  bool permanent = false;
  std::string error;  // one line, bounded, never the password
};

struct Reply {
  bool ok = false;
  std::string error;     // one line, bounded
  std::string sqlstate;  // when the server sent one
  std::vector<std::vector<std::optional<std::string>>> rows;

  // The value at (row, col), nullopt for NULL or when absent.
  std::optional<std::string> value(std::size_t row, std::size_t col) const {
    if (row >= rows.size() || col >= rows[row].size()) return std::nullopt;
    return rows[row][col];
  }
};

class Session {
 public:
  using ConnectDone = std::function<void(ConnectResult)>;
  using QueryDone = std::function<void(Reply)>;

  // Starts connecting; `done` runs once, from the loop (never inside the constructor).
  Session(sd_event* event, const ConnectParams& params, core::Millis timeout, ConnectDone done);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // After a successful connect, one query at a time; `done` runs once, from the loop. A query
  // that fails at the connection level (timeout, lost) leaves the session unusable.
  void query(std::string sql, core::Millis timeout, QueryDone done);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// First line of a libpq error, without the "connection to server at ... failed: " preamble.
std::string describe_error(const std::string& message);

// "0/3000060" -> byte position; nullopt if not an LSN.
std::optional<std::uint64_t> parse_lsn(const std::string& text);

// "512 B", "40 kB", "16 MB", "1.5 GB" (1024-based, like PostgreSQL).
std::string format_bytes(std::uint64_t bytes);

}  // namespace fo::actions::pg
