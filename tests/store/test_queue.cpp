// The write queue: callers never wait on a locked database, failed batches are retried,
// only round summaries are shed on overflow (with a gap marker), state saves coalesce,
// shutdown drains within its bound, and concurrent producers are safe.
#include <sys/resource.h>

#include <atomic>
#include <catch2/catch.hpp>

#include "daemon/store/store.hpp"
#include "store_test_util.hpp"

using namespace fo::store;
using namespace fo::store::test;
using namespace std::chrono_literals;

namespace {

// Another connection holding the write lock, like a backup job or a stuck sqlite3 shell.
class WriteLock {
 public:
  explicit WriteLock(const std::string& path) : raw_(path) { raw_.exec("BEGIN EXCLUSIVE"); }
  void release() { raw_.exec("ROLLBACK"); }

 private:
  RawDb raw_;
};

TransitionRecord transition(int64_t ts, std::string group = "web") {
  return TransitionRecord{ts,       std::move(group), "primary_active", "primary_degraded",
                          "r",      "auto",           std::nullopt,     1,
                          "primary"};
}

RoundRecord round_at(int64_t ts, std::string group = "web") {
  RoundRecord r;
  r.ts_ms = ts;
  r.group = std::move(group);
  r.state = "primary_active";
  r.p_healthy = r.p_reporting = r.p_configured = 3;
  r.p_known = true;
  r.p_locations = "ams=h,fra=h,nyc=h";
  return r;
}

ActionRecord action(uint64_t plan, int index) {
  ActionRecord a;
  a.group = "web";
  a.plan_id = plan;
  a.phase = "warm";
  a.step_index = index;
  a.step_name = "start";
  a.kind = "systemd";
  a.attempt = 1;
  a.started_ms = 1000 + index;
  a.result = "running";
  a.initiator = "auto";
  return a;
}

CommandRecord command(int64_t ts) {
  return CommandRecord{ts, "web", "hold", 0, "", "ok"};
}

// Enqueues a first record and waits until the writer has failed on it at least once: from
// then on that record is in flight and everything else stays queued until the lock goes.
void stall_writer(Store& store) {
  store.record_transition(transition(0));
  REQUIRE(eventually([&] { return store.stats().write_errors >= 1; }));
}

uint64_t total_dropped(const std::vector<GapRecord>& gaps) {
  uint64_t n = 0;
  for (const auto& g : gaps) n += g.dropped;
  return n;
}

}  // namespace

TEST_CASE("a locked database never delays callers and nothing is lost", "[store][queue]") {
  TempDir dir;
  const std::string path = dir.file("state.db");
  auto store = Store::open(path);
  WriteLock lock(path);

  using Clock = std::chrono::steady_clock;
  // A call that waits on the database would take about the 1 s busy timeout. Calls during
  // which the scheduler preempted this thread (2 vCPUs, parallel ctest) are judged only
  // against the loose bound, so the strict one measures our code, not the machine's load.
  Clock::duration worst{0}, worst_preempted{0};
  auto timed = [&](auto&& call) {
    rusage before{}, after{};
    getrusage(RUSAGE_THREAD, &before);
    auto start = Clock::now();
    call();
    auto took = Clock::now() - start;
    getrusage(RUSAGE_THREAD, &after);
    auto& slot = after.ru_nivcsw == before.ru_nivcsw ? worst : worst_preempted;
    slot = std::max(slot, took);
  };
  int n = 0;
  auto deadline = Clock::now() + 10s;
  // Keep producing while the writer is stuck behind the lock, until it has reported a failure.
  while (n < 100 || store->stats().write_errors == 0) {
    REQUIRE(Clock::now() < deadline);
    timed([&] { store->record_transition(transition(1000 + n)); });
    timed([&] { store->record_round(round_at(1000 + n)); });
    timed([&] { store->record_action(action(1, n)); });
    timed([&] { store->record_command(command(1000 + n)); });
    timed([&] { store->save_group_state("web", "blob" + std::to_string(n), 1000 + n); });
    ++n;
    std::this_thread::sleep_for(1ms);
  }
  INFO("worst enqueue latency us: "
       << std::chrono::duration_cast<std::chrono::microseconds>(worst).count()
       << ", when preempted: "
       << std::chrono::duration_cast<std::chrono::microseconds>(worst_preempted).count());
  CHECK(worst < 10ms);
  CHECK(worst_preempted < 500ms);
  CHECK_FALSE(store->flush(20ms));  // still locked: nothing can be committed
  CHECK(store->stats().queue_depth >= static_cast<size_t>(4 * n));

  lock.release();
  REQUIRE(store->flush(10s));
  auto stats = store->stats();
  CHECK(stats.write_errors >= 1);
  CHECK(stats.queue_depth == 0);
  CHECK(stats.dropped_rounds == 0);
  CHECK(stats.written >= static_cast<uint64_t>(4 * n + 1));  // state saves coalesce to >= 1
  CHECK(store->transitions("web", 1000, kForever, 0).size() == static_cast<size_t>(n));
  CHECK(store->rounds("web", 0, kForever, 0).size() == static_cast<size_t>(n));
  CHECK(store->actions("web", 0, kForever, 0).size() == static_cast<size_t>(n));
  CHECK(store->commands("web", 0, kForever, 0).size() == static_cast<size_t>(n));
  CHECK(store->load_group_states()["web"] == "blob" + std::to_string(n - 1));
}

TEST_CASE("state saves of one group coalesce while queued", "[store][queue]") {
  TempDir dir;
  const std::string path = dir.file("state.db");
  auto store = Store::open(path);
  WriteLock lock(path);
  store->save_group_state("web", "a", 1);
  REQUIRE(eventually([&] { return store->stats().write_errors >= 1; }));
  // "a" is in flight; the next saves of "web" collapse into one queued save.
  store->save_group_state("web", "b", 2);
  store->save_group_state("web", "c", 3);
  CHECK(store->stats().queue_depth == 2);
  store->save_group_state("db", "x", 4);
  store->save_group_state("web", "d", 5);
  CHECK(store->stats().queue_depth == 3);
  CHECK_FALSE(store->flush(20ms));

  lock.release();
  REQUIRE(store->flush(10s));
  // The in-flight "a" is written first, so the newest blob wins.
  CHECK(store->load_group_states() ==
        std::map<std::string, std::string>{{"db", "x"}, {"web", "d"}});
  CHECK(store->stats().written == 3);
}

TEST_CASE("overflow drops the oldest round summaries and records a gap", "[store][queue]") {
  TempDir dir;
  const std::string path = dir.file("state.db");
  auto store = Store::open(path, 4);
  WriteLock lock(path);
  stall_writer(*store);

  for (int i = 1; i <= 6; ++i) store->record_round(round_at(i * 1000));
  store->record_transition(transition(6500));
  store->record_action(action(1, 0));
  store->record_round(round_at(7000));
  store->record_round(round_at(8000));
  auto stats = store->stats();
  CHECK(stats.dropped_rounds == 6);
  CHECK(stats.queue_depth == 5);  // 4 queued + 1 in flight

  lock.release();
  REQUIRE(store->flush(10s));
  CHECK(store->rounds("web", 0, kForever, 0) ==
        std::vector<RoundRecord>{round_at(7000), round_at(8000)});
  CHECK(store->transitions("web", 0, kForever, 0).size() == 2);
  CHECK(store->actions("web", 0, kForever, 0).size() == 1);
  auto gaps = store->gaps("web", 0, kForever, 0);
  REQUIRE(gaps.size() == 1);
  CHECK(gaps[0].dropped == 6);
  CHECK(gaps[0].first_ms == 1000);
  CHECK(gaps[0].last_ms == 6000);
  CHECK(gaps[0].ts_ms > 0);
  CHECK(store->gaps("web", 6001, kForever, 0).empty());  // only ranges overlapping the window
  CHECK(store->gaps("db", 0, kForever, 0).empty());
}

TEST_CASE("overflow never drops transitions, actions, commands or states", "[store][queue]") {
  TempDir dir;
  const std::string path = dir.file("state.db");
  auto store = Store::open(path, 2);
  WriteLock lock(path);
  stall_writer(*store);

  for (int i = 1; i <= 5; ++i) store->record_transition(transition(i * 1000));
  for (int i = 0; i < 3; ++i) store->record_action(action(2, i));
  store->record_command(command(1000));
  store->save_group_state("web", "s", 1000);
  CHECK(store->stats().queue_depth == 11);  // above the limit of 2
  CHECK(store->stats().dropped_rounds == 0);
  // Full and no round queued: the new round itself is the one shed.
  store->record_round(round_at(9000, "db"));
  CHECK(store->stats().dropped_rounds == 1);
  CHECK(store->stats().queue_depth == 11);

  lock.release();
  REQUIRE(store->flush(10s));
  CHECK(store->transitions("", 0, kForever, 0).size() == 6);
  CHECK(store->actions("", 0, kForever, 0).size() == 3);
  CHECK(store->commands("", 0, kForever, 0).size() == 1);
  CHECK(store->load_group_states().size() == 1);
  CHECK(store->rounds("", 0, kForever, 0).empty());
  auto gaps = store->gaps("", 0, kForever, 0);
  CHECK(total_dropped(gaps) == 1);
  REQUIRE(gaps.size() == 1);
  CHECK(gaps[0].group == "db");
  CHECK(gaps[0].first_ms == 9000);
}

TEST_CASE("concurrent producers with flush and stats in between", "[store][queue]") {
  TempDir dir;
  auto store = Store::open(dir.file("state.db"));
  constexpr int kPerThread = 1000;
  std::atomic<int> finished{0};
  auto produce = [&](std::string group) {
    for (int i = 0; i < kPerThread; ++i) {
      store->record_transition(transition(i, group));
      store->record_round(round_at(i, group));
      if (i % 100 == 0) store->save_group_state(group, std::to_string(i), i);
    }
    ++finished;
  };
  std::thread a(produce, "a");
  std::thread b(produce, "b");
  uint64_t last_written = 0;
  while (finished.load() < 2) {
    auto s = store->stats();
    CHECK(s.written >= last_written);  // monotonic
    last_written = s.written;
    store->flush(1ms);
  }
  a.join();
  b.join();
  REQUIRE(store->flush(10s));
  auto stats = store->stats();
  CHECK(stats.queue_depth == 0);
  CHECK(stats.dropped_rounds == 0);
  CHECK(stats.write_errors == 0);
  for (std::string group : {"a", "b"}) {
    INFO(group);
    auto ts = store->transitions(group, 0, kForever, 0);
    REQUIRE(ts.size() == static_cast<size_t>(kPerThread));
    CHECK(ts.front().ts_ms == kPerThread - 1);
    CHECK(store->rounds(group, 0, kForever, 0).size() == static_cast<size_t>(kPerThread));
  }
  CHECK(store->load_group_states() ==
        std::map<std::string, std::string>{{"a", "900"}, {"b", "900"}});
  // Every transition and round counted once; state saves count once per written save.
  CHECK(stats.written >= 4 * static_cast<uint64_t>(kPerThread) + 2);
  CHECK(stats.written <= 4 * static_cast<uint64_t>(kPerThread) + 20);
}

TEST_CASE("destruction writes what is queued", "[store][queue]") {
  TempDir dir;
  const std::string path = dir.file("state.db");
  {
    auto store = Store::open(path);
    for (int i = 0; i < 500; ++i) store->record_transition(transition(i));
    store->save_group_state("web", "last", 500);
  }
  auto store = Store::open(path);
  CHECK(store->transitions("web", 0, kForever, 0).size() == 500);
  CHECK(store->load_group_states()["web"] == "last");
}

TEST_CASE("destruction with a stuck database gives up after a bounded wait", "[store][queue]") {
  TempDir dir;
  const std::string path = dir.file("state.db");
  auto store = Store::open(path);
  WriteLock lock(path);
  stall_writer(*store);
  for (int i = 1; i <= 10; ++i) store->record_transition(transition(i));
  auto start = std::chrono::steady_clock::now();
  store.reset();
  auto took = std::chrono::steady_clock::now() - start;
  INFO("shutdown took ms: " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
  CHECK(took < 3500ms);
  CHECK(took >= 1500ms);  // it did try for about the drain budget before giving up
  lock.release();
  CHECK(Store::open(path)->transitions("", 0, kForever, 0).empty());
}
