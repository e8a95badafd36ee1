// Every record type written through the queue comes back through the read APIs: ordering,
// limit, half-open time filters, group filter, upserts and state coalescing.
#include <catch2/catch.hpp>

#include "daemon/store/store.hpp"
#include "store_test_util.hpp"

using namespace fo::store;
using namespace fo::store::test;
using namespace std::chrono_literals;

namespace {

TransitionRecord transition(int64_t ts, std::string group, std::string to) {
  return TransitionRecord{ts,
                          std::move(group),
                          "primary_active",
                          std::move(to),
                          "reason " + std::to_string(ts),
                          "auto",
                          std::nullopt,
                          3,
                          to == "secondary_active" ? "secondary" : "primary"};
}

RoundRecord round_at(int64_t ts, std::string group) {
  return RoundRecord{ts,   std::move(group),    "primary_active",   5, 6, 6, true, 6, 6, 6,
                     true, "ams=h,fra=u,nyc=m", "ams=h,fra=h,nyc=h"};
}

ActionRecord step(uint64_t plan, int index, int attempt, int64_t started, std::string result) {
  ActionRecord a;
  a.group = "web";
  a.plan_id = plan;
  a.phase = "failover";
  a.step_index = index;
  a.step_name = "step" + std::to_string(index);
  a.kind = "dns";
  a.attempt = attempt;
  a.started_ms = started;
  a.ended_ms = result == "running" ? 0 : started + 50;
  a.result = std::move(result);
  a.exit_code = a.result == "failed" ? 1 : 0;
  a.output = "out";
  a.initiator = "auto";
  a.term = 9;
  return a;
}

template <class R>
std::vector<int64_t> times(const std::vector<R>& rows) {
  std::vector<int64_t> out;
  for (const auto& r : rows) out.push_back(r.ts_ms);
  return out;
}

}  // namespace

TEST_CASE("transitions round-trip newest first with filters", "[store][records]") {
  TempDir dir;
  auto store = Store::open(dir.file("state.db"));
  auto t1000 = transition(1000, "web", "primary_degraded");
  t1000.uid = 0;  // root is a real uid, not "no uid"
  auto t2000 = transition(2000, "web", "failing_over");
  t2000.initiator = "operator";
  t2000.uid = 1001;
  t2000.term = 42;
  store->record_transition(t1000);
  store->record_transition(transition(1500, "db", "held"));
  store->record_transition(t2000);
  store->record_transition(transition(2500, "db", "primary_active"));
  store->record_transition(transition(3000, "web", "secondary_active"));
  REQUIRE(store->flush(5s));

  CHECK(times(store->transitions("", 0, kForever, 0)) ==
        std::vector<int64_t>{3000, 2500, 2000, 1500, 1000});
  auto web = store->transitions("web", 0, kForever, 0);
  REQUIRE(times(web) == std::vector<int64_t>{3000, 2000, 1000});
  CHECK(web[1] == t2000);
  CHECK(web[2] == t1000);
  CHECK(web[0].uid == std::nullopt);
  CHECK(times(store->transitions("", 0, kForever, 2)) == std::vector<int64_t>{3000, 2500});
  // since inclusive, until exclusive
  CHECK(times(store->transitions("", 1500, 3000, 0)) == std::vector<int64_t>{2500, 2000, 1500});
  CHECK(times(store->transitions("db", 1501, kForever, 0)) == std::vector<int64_t>{2500});
  CHECK(store->transitions("nosuch", 0, kForever, 0).empty());
}

TEST_CASE("records with the same timestamp keep insertion order", "[store][records]") {
  TempDir dir;
  auto store = Store::open(dir.file("state.db"));
  store->record_transition(transition(1000, "web", "a"));
  store->record_transition(transition(1000, "web", "b"));
  store->record_round(round_at(1000, "web"));
  auto second = round_at(1000, "web");
  second.state = "primary_degraded";
  store->record_round(second);
  REQUIRE(store->flush(5s));
  auto ts = store->transitions("web", 0, kForever, 0);
  REQUIRE(ts.size() == 2);
  CHECK(ts[0].to == "b");  // newest first
  auto rs = store->rounds("web", 0, kForever, 0);
  REQUIRE(rs.size() == 2);
  CHECK(rs[1] == second);  // oldest first
}

TEST_CASE("rounds round-trip oldest first for replay", "[store][records]") {
  TempDir dir;
  auto store = Store::open(dir.file("state.db"));
  for (int64_t ts = 1000; ts <= 5000; ts += 1000) store->record_round(round_at(ts, "web"));
  auto other = round_at(2500, "db");
  other.p_known = false;
  other.s_healthy = 0;
  other.p_locations = "";
  store->record_round(other);
  REQUIRE(store->flush(5s));

  auto web = store->rounds("web", 0, kForever, 0);
  REQUIRE(times(web) == std::vector<int64_t>{1000, 2000, 3000, 4000, 5000});
  CHECK(web[0] == round_at(1000, "web"));
  CHECK(times(store->rounds("", 0, kForever, 0)) ==
        std::vector<int64_t>{1000, 2000, 2500, 3000, 4000, 5000});
  // limit keeps the oldest rows from `since` on, so a replay can page forward
  CHECK(times(store->rounds("web", 2000, kForever, 2)) == std::vector<int64_t>{2000, 3000});
  CHECK(times(store->rounds("web", 2000, 4000, 0)) == std::vector<int64_t>{2000, 3000});
  auto db_rounds = store->rounds("db", 0, kForever, 0);
  REQUIRE(db_rounds.size() == 1);
  CHECK(db_rounds[0] == other);
}

TEST_CASE("an action step upserts from running to its result", "[store][records]") {
  TempDir dir;
  auto store = Store::open(dir.file("state.db"));
  store->record_action(step(7, 0, 1, 1000, "running"));
  REQUIRE(store->flush(5s));
  auto rows = store->actions("web", 0, kForever, 0);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].result == "running");
  CHECK(rows[0].ended_ms == 0);

  auto done = step(7, 0, 1, 1000, "ok");
  done.output = "switched A record";
  store->record_action(done);
  REQUIRE(store->flush(5s));
  rows = store->actions("web", 0, kForever, 0);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0] == done);
}

TEST_CASE("plan steps come back in execution order, actions newest first", "[store][records]") {
  TempDir dir;
  auto store = Store::open(dir.file("state.db"));
  auto failed = step(7, 0, 1, 1000, "failed");
  auto retry = step(7, 0, 2, 1200, "ok");
  auto second = step(7, 1, 1, 1400, "timeout");
  auto running = step(7, 2, 1, 1600, "running");
  auto other_plan = step(8, 0, 1, 1300, "ok");
  auto other_group = step(7, 0, 1, 1100, "skipped");
  other_group.group = "db";
  // Enqueued out of order: the read sorts by start time.
  for (const auto& a : {second, failed, other_plan, running, retry, other_group}) {
    store->record_action(a);
  }
  REQUIRE(store->flush(5s));

  CHECK(store->plan_steps("web", 7) == std::vector<ActionRecord>{failed, retry, second, running});
  CHECK(store->plan_steps("web", 9).empty());
  auto newest = store->actions("", 0, kForever, 3);
  REQUIRE(newest.size() == 3);
  CHECK(newest[0] == running);
  CHECK(newest[1] == second);
  CHECK(newest[2] == other_plan);
  CHECK(store->actions("db", 0, kForever, 0) == std::vector<ActionRecord>{other_group});
  CHECK(store->actions("web", 1200, 1400, 0) == std::vector<ActionRecord>{other_plan, retry});
}

TEST_CASE("long action output is stored as a bounded excerpt", "[store][records]") {
  TempDir dir;
  auto store = Store::open(dir.file("state.db"));
  auto a = step(1, 0, 1, 1000, "failed");
  a.output = std::string(3 * kMaxTextBytes, 'x');
  store->record_action(a);
  REQUIRE(store->flush(5s));
  auto rows = store->actions("web", 0, kForever, 0);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].output == std::string(kMaxTextBytes, 'x'));
}

TEST_CASE("operator commands round-trip newest first", "[store][records]") {
  TempDir dir;
  auto store = Store::open(dir.file("state.db"));
  CommandRecord hold{1000, "web", "hold", 1001, R"({"reason":"maintenance"})", "ok"};
  CommandRecord release{2000, "web", "release", 0, "", "ok"};
  CommandRecord denied{1500, "db", "failover", std::nullopt, "--force", "denied: not leader"};
  store->record_command(hold);
  store->record_command(release);
  store->record_command(denied);
  REQUIRE(store->flush(5s));
  CHECK(store->commands("", 0, kForever, 0) == std::vector<CommandRecord>{release, denied, hold});
  CHECK(store->commands("web", 0, 2000, 0) == std::vector<CommandRecord>{hold});
  CHECK(store->commands("", 0, kForever, 1) == std::vector<CommandRecord>{release});
}

TEST_CASE("group state saves are upserts and survive a restart", "[store][records]") {
  TempDir dir;
  const std::string path = dir.file("state.db");
  {
    auto store = Store::open(path);
    CHECK(store->load_group_states().empty());
    store->save_group_state("web", R"({"state":"primary_active"})", 1000);
    store->save_group_state("db", "db-1", 1000);
    REQUIRE(store->flush(5s));
    store->save_group_state("web", R"({"state":"failing_over"})", 2000);
    REQUIRE(store->flush(5s));
    CHECK(
        store->load_group_states() ==
        std::map<std::string, std::string>{{"db", "db-1"}, {"web", R"({"state":"failing_over"})"}});
  }
  auto store = Store::open(path);
  auto states = store->load_group_states();
  CHECK(states.size() == 2);
  CHECK(states["web"] == R"({"state":"failing_over"})");
  // The blob is opaque and never clipped.
  std::string big(3 * kMaxTextBytes, 'b');
  store->save_group_state("web", big, 3000);
  REQUIRE(store->flush(5s));
  CHECK(store->load_group_states()["web"] == big);
}
