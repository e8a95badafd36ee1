// Write side of the store. Callers (the event loop) only take a mutex for a queue push; the
// writer thread does all SQLite work, so a slow or locked database never delays a decision.
#include "daemon/store/writer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

namespace fo::store {
namespace {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

int64_t wall_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t as_int(uint64_t v) {
  return static_cast<int64_t>(v);
}

// Runs a fully bound statement that returns no rows and makes it reusable.
int run_once(db::Stmt& s) {
  int rc = s.step();
  s.reset();
  return rc;
}

}  // namespace

Writer::Writer(db::DbPtr conn, size_t queue_limit)
    : db_(std::move(conn)),
      begin_(db_.get(), "BEGIN IMMEDIATE"),
      commit_(db_.get(), "COMMIT"),
      insert_transition_(db_.get(),
                         "INSERT INTO transitions (ts_ms, group_name, from_state, to_state, "
                         "reason, initiator, uid, term, active) "
                         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
      insert_round_(db_.get(),
                    "INSERT INTO rounds (ts_ms, group_name, state, p_healthy, p_reporting, "
                    "p_configured, p_known, s_healthy, s_reporting, s_configured, s_known, "
                    "p_locations, s_locations) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
      upsert_action_(db_.get(),
                     "INSERT INTO action_steps (group_name, plan_id, phase, step_index, "
                     "step_name, kind, attempt, started_ms, ended_ms, result, exit_code, output, "
                     "initiator, term, stage, detail) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
                     "?16) "
                     "ON CONFLICT (group_name, plan_id, phase, stage, step_index, attempt) "
                     "DO UPDATE SET "
                     "step_name = excluded.step_name, kind = excluded.kind, "
                     "started_ms = excluded.started_ms, ended_ms = excluded.ended_ms, "
                     "result = excluded.result, exit_code = excluded.exit_code, "
                     "output = excluded.output, initiator = excluded.initiator, "
                     "term = excluded.term, detail = excluded.detail"),
      insert_command_(db_.get(),
                      "INSERT INTO commands (ts_ms, group_name, command, uid, arguments, result) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
      upsert_state_(db_.get(),
                    "INSERT INTO group_state (group_name, blob, updated_ms) VALUES (?1, ?2, ?3) "
                    "ON CONFLICT (group_name) DO UPDATE SET blob = excluded.blob, "
                    "updated_ms = excluded.updated_ms"),
      insert_gap_(db_.get(),
                  "INSERT INTO round_gaps (ts_ms, group_name, dropped, first_ts_ms, last_ts_ms) "
                  "VALUES (?1, ?2, ?3, ?4, ?5)"),
      limit_(std::max<size_t>(queue_limit, 1)),
      thread_([this] { run(); }) {}

Writer::~Writer() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    drain_deadline_ = Clock::now() + kDrainWait;
  }
  wake_.notify_all();
  thread_.join();
  size_t left = queue_.size() + inflight_records_;
  uint64_t gap_rounds = inflight_gap_rounds_;
  for (const auto& [group, g] : pending_gaps_) gap_rounds += g.dropped;
  if (left > 0 || gap_rounds > 0) {
    spdlog::error(
        "store: shutdown: {} records and the gap marker for {} dropped rounds left unwritten "
        "after {} ms (database busy or failing)",
        left, gap_rounds, kDrainWait.count());
  }
}

void Writer::enqueue(Record r) {
  bool notify = false;
  bool log_drop = false;
  uint64_t dropped_total = 0;
  size_t depth = 0;
  {
    std::lock_guard lk(mu_);
    if (auto* save = std::get_if<StateSave>(&r)) {
      auto it = queued_state_seq_.find(save->group);
      if (it != queued_state_seq_.end()) {
        auto q = std::lower_bound(queue_.begin(), queue_.end(), it->second,
                                  [](const Queued& e, uint64_t seq) { return e.seq < seq; });
        if (q != queue_.end() && q->seq == it->second) {
          std::get<StateSave>(q->rec) = std::move(*save);  // older blob is superseded
          return;
        }
        queued_state_seq_.erase(it);
      }
    }
    const bool is_round = std::holds_alternative<RoundRecord>(r);
    bool accept = true;
    if (queue_.size() >= limit_) {
      uint64_t before = dropped_rounds_;
      if (queued_rounds_ > 0) {
        drop_oldest_round_locked();
      } else if (is_round) {
        note_dropped_locked(std::get<RoundRecord>(r));
        accept = false;
      }
      // Everything else goes in above the limit: the engine bounds how many it produces.
      if (dropped_rounds_ != before) {
        auto now = Clock::now();
        if (!drop_logged_ || now - last_drop_log_ >= kDropLogEvery) {
          drop_logged_ = true;
          last_drop_log_ = now;
          log_drop = true;
          dropped_total = dropped_rounds_;
        }
      }
    }
    if (accept) {
      uint64_t seq = ++last_seq_;
      if (auto* save = std::get_if<StateSave>(&r)) queued_state_seq_[save->group] = seq;
      if (is_round) ++queued_rounds_;
      queue_.push_back(Queued{seq, std::move(r)});
      notify = writer_idle_;
    }
    depth = queue_.size();
  }
  if (notify) wake_.notify_one();
  if (log_drop) {
    spdlog::warn(
        "store: write queue full ({} records, limit {}): dropping oldest round summaries, {} "
        "dropped so far",
        depth, limit_, dropped_total);
  }
}

void Writer::note_dropped_locked(const RoundRecord& r) {
  ++dropped_rounds_;
  auto [it, fresh] = pending_gaps_.try_emplace(r.group);
  Gap& g = it->second;
  if (fresh || r.ts_ms < g.first_ms) g.first_ms = r.ts_ms;
  if (fresh || r.ts_ms > g.last_ms) g.last_ms = r.ts_ms;
  ++g.dropped;
}

void Writer::drop_oldest_round_locked() {
  auto it = std::find_if(queue_.begin(), queue_.end(), [](const Queued& e) {
    return std::holds_alternative<RoundRecord>(e.rec);
  });
  if (it == queue_.end()) return;
  note_dropped_locked(std::get<RoundRecord>(it->rec));
  --queued_rounds_;
  queue_.erase(it);  // near the front in practice, and deque erase moves the shorter side
}

void Writer::take_batch_locked(std::vector<Queued>& batch, Gaps& gaps) {
  size_t n = std::min(queue_.size(), kBatchMax);
  batch.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Queued& q = queue_.front();
    if (std::holds_alternative<RoundRecord>(q.rec)) {
      --queued_rounds_;
    } else if (auto* save = std::get_if<StateSave>(&q.rec)) {
      auto it = queued_state_seq_.find(save->group);
      if (it != queued_state_seq_.end() && it->second == q.seq) queued_state_seq_.erase(it);
    }
    batch.push_back(std::move(q));
    queue_.pop_front();
  }
  gaps.swap(pending_gaps_);
  inflight_records_ = batch.size();
  inflight_gap_rounds_ = 0;
  for (const auto& [group, g] : gaps) inflight_gap_rounds_ += g.dropped;
}

void Writer::run() {
  std::vector<Queued> batch;
  Gaps gaps;
  int failures = 0;
  std::minstd_rand rng(std::random_device{}());
  for (;;) {
    bool stopping = false;
    Clock::time_point deadline;
    {
      std::unique_lock lk(mu_);
      if (batch.empty() && gaps.empty()) {
        writer_idle_ = true;
        wake_.wait(lk, [&] { return stopping_ || !queue_.empty() || !pending_gaps_.empty(); });
        writer_idle_ = false;
        if (queue_.empty() && pending_gaps_.empty()) return;  // stopping and drained
        if (!stopping_ || Clock::now() < drain_deadline_) take_batch_locked(batch, gaps);
      }
      stopping = stopping_;
      deadline = drain_deadline_;
    }
    if (stopping) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return;  // the destructor reports what is left
      // Shutdown must stay bounded even while SQLite waits for a lock.
      sqlite3_busy_timeout(db_.get(), static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    }

    std::string err;
    if (write_batch(batch, gaps, &err)) {
      {
        std::lock_guard lk(mu_);
        written_ += batch.size();
        if (!batch.empty()) done_seq_ = batch.back().seq;
        inflight_records_ = 0;
        inflight_gap_rounds_ = 0;
      }
      done_.notify_all();
      batch.clear();
      gaps.clear();
      failures = 0;
      continue;
    }

    // Keep the batch and retry: history must not silently lose records.
    ++failures;
    auto base = kBackoffStart * (int64_t{1} << std::min(failures - 1, 16));
    base = std::min<std::chrono::milliseconds>(base, kBackoffCap);
    std::uniform_int_distribution<int64_t> jitter(base.count() / 2, base.count());
    auto delay = std::chrono::milliseconds(jitter(rng));
    spdlog::warn("store: writing {} records failed (attempt {}), retrying in {} ms: {}",
                 batch.size(), failures, delay.count(), err);
    std::unique_lock lk(mu_);
    ++write_errors_;
    auto until = Clock::now() + delay;
    for (;;) {
      auto limit = stopping_ ? std::min(until, drain_deadline_) : until;
      if (Clock::now() >= limit) break;
      wake_.wait_until(lk, limit);
    }
  }
}

bool Writer::write_batch(const std::vector<Queued>& batch, const Gaps& gaps, std::string* err) {
  int rc = run_once(begin_);
  if (rc != SQLITE_DONE) {
    *err = "BEGIN: " + db::describe(db_.get(), rc);
    rollback();
    return false;
  }
  for (const Queued& q : batch) {
    rc = write_record(q.rec);
    if (rc != SQLITE_DONE) {
      *err = db::describe(db_.get(), rc);
      rollback();
      return false;
    }
  }
  int64_t now_ms = wall_now_ms();
  for (const auto& [group, g] : gaps) {
    rc = write_gap(group, g, now_ms);
    if (rc != SQLITE_DONE) {
      *err = db::describe(db_.get(), rc);
      rollback();
      return false;
    }
  }
  rc = run_once(commit_);
  if (rc != SQLITE_DONE) {
    *err = "COMMIT: " + db::describe(db_.get(), rc);
    rollback();
    return false;
  }
  return true;
}

void Writer::rollback() {
  if (!sqlite3_get_autocommit(db_.get())) db::exec(db_.get(), "ROLLBACK", nullptr);
}

int Writer::write_record(const Record& rec) {
  return std::visit(Overloaded{
                        [&](const TransitionRecord& r) {
                          auto& s = insert_transition_;
                          s.bind(1, r.ts_ms);
                          s.bind(2, r.group);
                          s.bind(3, r.from);
                          s.bind(4, r.to);
                          s.bind(5, r.reason);
                          s.bind(6, r.initiator);
                          s.bind(7, r.uid);
                          s.bind(8, as_int(r.term));
                          s.bind(9, r.active);
                          return run_once(s);
                        },
                        [&](const RoundRecord& r) {
                          auto& s = insert_round_;
                          s.bind(1, r.ts_ms);
                          s.bind(2, r.group);
                          s.bind(3, r.state);
                          s.bind(4, int64_t{r.p_healthy});
                          s.bind(5, int64_t{r.p_reporting});
                          s.bind(6, int64_t{r.p_configured});
                          s.bind(7, int64_t{r.p_known});
                          s.bind(8, int64_t{r.s_healthy});
                          s.bind(9, int64_t{r.s_reporting});
                          s.bind(10, int64_t{r.s_configured});
                          s.bind(11, int64_t{r.s_known});
                          s.bind(12, r.p_locations);
                          s.bind(13, r.s_locations);
                          return run_once(s);
                        },
                        [&](const ActionRecord& r) {
                          auto& s = upsert_action_;
                          s.bind(1, r.group);
                          s.bind(2, as_int(r.plan_id));
                          s.bind(3, r.phase);
                          s.bind(4, int64_t{r.step_index});
                          s.bind(5, r.step_name);
                          s.bind(6, r.kind);
                          s.bind(7, int64_t{r.attempt});
                          s.bind(8, r.started_ms);
                          s.bind(9, r.ended_ms);
                          s.bind(10, r.result);
                          s.bind(11, int64_t{r.exit_code});
                          s.bind(12, r.output);
                          s.bind(13, r.initiator);
                          s.bind(14, as_int(r.term));
                          s.bind(15, r.stage);
                          s.bind(16, r.detail);
                          return run_once(s);
                        },
                        [&](const CommandRecord& r) {
                          auto& s = insert_command_;
                          s.bind(1, r.ts_ms);
                          s.bind(2, r.group);
                          s.bind(3, r.command);
                          s.bind(4, r.uid);
                          s.bind(5, r.arguments);
                          s.bind(6, r.result);
                          return run_once(s);
                        },
                        [&](const StateSave& r) {
                          auto& s = upsert_state_;
                          s.bind(1, r.group);
                          s.bind(2, r.blob, /*clip=*/false);
                          s.bind(3, r.ts_ms);
                          return run_once(s);
                        },
                    },
                    rec);
}

int Writer::write_gap(const std::string& group, const Gap& g, int64_t now_ms) {
  auto& s = insert_gap_;
  s.bind(1, now_ms);
  s.bind(2, group);
  s.bind(3, as_int(g.dropped));
  s.bind(4, g.first_ms);
  s.bind(5, g.last_ms);
  return run_once(s);
}

bool Writer::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  const uint64_t target = last_seq_;
  return done_.wait_for(lk, timeout, [&] {
    return done_seq_ >= target && pending_gaps_.empty() && inflight_gap_rounds_ == 0;
  });
}

StoreStats Writer::stats() const {
  std::lock_guard lk(mu_);
  return StoreStats{queue_.size() + inflight_records_, written_, write_errors_, dropped_rounds_};
}

}  // namespace fo::store
