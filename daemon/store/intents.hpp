// The intent log: the synchronous part of the store. Before a plan step starts, its intent is
// committed (group, plan, step, idempotency key); after the step is verified it is marked done.
// Both writes are durable (synchronous=FULL on this connection) before the call returns, so a
// daemon killed at any instant resumes a plan at the first step that was not verified and
// never re-runs one that was. Everything else the store writes goes through the queued writer.
// Runs on the loop thread; a write takes a few milliseconds (one fsync).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/store/db.hpp"

namespace fo::store {

struct Intent {
  std::string group;
  uint64_t plan_id = 0;
  int step_index = 0;
  std::string idempotency_key;
  std::string phase, step_name, kind;
  uint64_t term = 0;
  int begun = 0;           // how many times the step was begun (more than 1: re-run after a crash)
  int64_t started_ms = 0;  // first begin
  int64_t done_ms = 0;     // 0: not verified
  std::string detail;      // outcome detail when done

  bool operator==(const Intent&) const = default;
};

class IntentLog {
 public:
  // Opens its own connection to the (already migrated) database. Throws StoreError.
  explicit IntentLog(const std::string& path);

  // Records that the step is about to start; a second begin of the same step (re-run after a
  // crash) keeps started_ms and counts. Returns "" or the error.
  std::string begin(const Intent& intent);
  // Marks the step verified. Returns "" or the error.
  std::string done(const std::string& group, uint64_t plan_id, int step_index, int64_t done_ms,
                   const std::string& detail);
  // Every intent of a plan, by step index. Throws StoreError.
  std::vector<Intent> plan(const std::string& group, uint64_t plan_id);

 private:
  std::mutex mu_;
  db::DbPtr db_;
};

}  // namespace fo::store
