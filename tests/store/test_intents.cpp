// The intent log: durable begin/done per plan step, re-begins counted, errors as text, and the
// pre-check rows that share action_steps with apply rows (schema 3).
#include <catch2/catch.hpp>

#include "daemon/store/intents.hpp"
#include "daemon/store/store.hpp"
#include "store_test_util.hpp"

using namespace fo::store;
using fo::store::test::TempDir;

namespace {

Intent intent(uint64_t plan, int index) {
  Intent i;
  i.group = "web";
  i.plan_id = plan;
  i.step_index = index;
  i.idempotency_key = "web/" + std::to_string(plan) + "/" + std::to_string(index);
  i.phase = "failover";
  i.step_name = "step" + std::to_string(index);
  i.kind = "exec";
  i.term = 3;
  i.started_ms = 1000 + index;
  return i;
}

}  // namespace

TEST_CASE("intents: begin, done and read back per plan", "[intents]") {
  TempDir dir;
  auto store = Store::open(dir.file("s.db"));
  IntentLog log(dir.file("s.db"));
  CHECK(log.begin(intent(7, 0)) == "");
  CHECK(log.done("web", 7, 0, 2000, "exited 0") == "");
  CHECK(log.begin(intent(7, 1)) == "");
  CHECK(log.begin(intent(8, 0)) == "");  // another plan
  auto rows = log.plan("web", 7);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].idempotency_key == "web/7/0");
  CHECK(rows[0].done_ms == 2000);
  CHECK(rows[0].detail == "exited 0");
  CHECK(rows[0].begun == 1);
  CHECK(rows[1].done_ms == 0);
  CHECK(log.plan("db", 7).empty());
}

TEST_CASE("intents: a second begin of a step counts and keeps the first start", "[intents]") {
  TempDir dir;
  auto store = Store::open(dir.file("s.db"));
  IntentLog log(dir.file("s.db"));
  CHECK(log.begin(intent(7, 0)) == "");
  Intent again = intent(7, 0);
  again.started_ms = 5000;
  again.term = 4;
  CHECK(log.begin(again) == "");
  auto rows = log.plan("web", 7);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].begun == 2);
  CHECK(rows[0].started_ms == 1000);
  CHECK(rows[0].term == 4);
}

TEST_CASE("intents: done without begin is an error, not a crash", "[intents]") {
  TempDir dir;
  auto store = Store::open(dir.file("s.db"));
  IntentLog log(dir.file("s.db"));
  CHECK(log.done("web", 1, 0, 10, "x") == "no intent recorded for this step");
}

TEST_CASE("intents: survive reopening (another process after a crash)", "[intents]") {
  TempDir dir;
  {
    auto store = Store::open(dir.file("s.db"));
    IntentLog log(dir.file("s.db"));
    CHECK(log.begin(intent(9, 0)) == "");
    CHECK(log.done("web", 9, 0, 1500, "ok") == "");
    CHECK(log.begin(intent(9, 1)) == "");
  }
  auto store = Store::open(dir.file("s.db"));
  IntentLog log(dir.file("s.db"));
  auto rows = log.plan("web", 9);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].done_ms == 1500);
  CHECK(rows[1].done_ms == 0);
}

TEST_CASE("action steps: a pre-check row and an apply row of the same step coexist", "[intents]") {
  TempDir dir;
  auto store = Store::open(dir.file("s.db"));
  ActionRecord check;
  check.group = "web";
  check.plan_id = 7;
  check.phase = "failover";
  check.stage = "check";
  check.step_index = 0;
  check.step_name = "db";
  check.kind = "postgres";
  check.attempt = 1;
  check.started_ms = 100;
  check.ended_ms = 110;
  check.result = "ok";
  check.detail = "lag 0 B";
  ActionRecord apply = check;
  apply.stage = "apply";
  apply.started_ms = 120;
  apply.ended_ms = 300;
  apply.detail = "promoted";
  store->record_action(check);
  store->record_action(apply);
  REQUIRE(store->flush(std::chrono::seconds(5)));
  CHECK(store->plan_steps("web", 7) == std::vector<ActionRecord>{check, apply});
}
