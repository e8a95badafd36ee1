// Write side of the store: a bounded in-memory queue drained by one writer thread that commits
// in batches, retries failed batches with backoff, and sheds only round summaries on overflow.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "daemon/store/db.hpp"
#include "daemon/store/store.hpp"

namespace fo::store {

struct StateSave {
  std::string group;
  std::string blob;
  int64_t ts_ms = 0;
};

using Record = std::variant<TransitionRecord, RoundRecord, ActionRecord, CommandRecord, StateSave>;

class Writer {
 public:
  // Takes a migrated connection and starts the writer thread.
  Writer(db::DbPtr conn, size_t queue_limit);
  // Stops the thread after draining for at most kDrainWait; logs what is left by count.
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void enqueue(Record r);
  bool flush(std::chrono::milliseconds timeout);
  StoreStats stats() const;

  static constexpr std::chrono::milliseconds kDrainWait{2000};
  static constexpr std::chrono::milliseconds kBackoffStart{50};
  static constexpr std::chrono::milliseconds kBackoffCap{5000};
  static constexpr std::chrono::seconds kDropLogEvery{10};
  static constexpr size_t kBatchMax = 256;

 private:
  using Clock = std::chrono::steady_clock;
  struct Queued {
    uint64_t seq;  // strictly increasing along the queue
    Record rec;
  };
  struct Gap {
    uint64_t dropped = 0;
    int64_t first_ms = 0, last_ms = 0;
  };
  using Gaps = std::map<std::string, Gap>;

  void run();
  void take_batch_locked(std::vector<Queued>& batch, Gaps& gaps);
  void note_dropped_locked(const RoundRecord& r);
  void drop_oldest_round_locked();
  // One transaction for the whole batch; on failure everything is rolled back.
  bool write_batch(const std::vector<Queued>& batch, const Gaps& gaps, std::string* err);
  int write_record(const Record& r);
  int write_gap(const std::string& group, const Gap& g, int64_t now_ms);
  void rollback();

  db::DbPtr db_;  // used only by the writer thread once it runs
  db::Stmt begin_, commit_, insert_transition_, insert_round_, upsert_action_, insert_command_,
      upsert_state_, insert_gap_;
  const size_t limit_;

  mutable std::mutex mu_;
  std::condition_variable wake_;  // the writer waits for work or stop
  std::condition_variable done_;  // flush() waits for commits
  std::deque<Queued> queue_;
  std::unordered_map<std::string, uint64_t> queued_state_seq_;  // group -> seq of its queued save
  Gaps pending_gaps_;
  size_t queued_rounds_ = 0;
  size_t inflight_records_ = 0;
  uint64_t inflight_gap_rounds_ = 0;
  uint64_t last_seq_ = 0;  // seq of the newest queued record
  uint64_t done_seq_ = 0;  // seq of the newest committed record
  uint64_t written_ = 0, write_errors_ = 0, dropped_rounds_ = 0;
  bool writer_idle_ = false;
  bool stopping_ = false;
  Clock::time_point drain_deadline_{};
  Clock::time_point last_drop_log_{};
  bool drop_logged_ = false;

  std::thread thread_;  // last: started after everything above exists
};

}  // namespace fo::store
