// The postgres step against a real PostgreSQL 15 primary and streaming standby (one fresh
// pair per test case): promote with fencing, idempotent re-run, lag gate and forced apply,
// old primary down, failback through pg-rewind.sh, split brain as drift, password files.
#include <catch2/catch.hpp>

#include "tests/steps/postgres/step_rig.hpp"

using fo::core::Site;
using fo::test::PgNodes;
using fo::test::StepMode;
using fo::test::StepRig;

namespace {

// Outcome checks that show the step's detail when they fail.
#define CHECK_OK(o)   \
  do {                \
    INFO((o).detail); \
    CHECK((o).ok());  \
  } while (0)
#define REQUIRE_OK(o)  \
  do {                 \
    INFO((o).detail);  \
    REQUIRE((o).ok()); \
  } while (0)
#define CHECK_FAILED(o)    \
  do {                     \
    INFO((o).detail);      \
    CHECK_FALSE((o).ok()); \
  } while (0)
#define REQUIRE_FAILED(o)    \
  do {                       \
    INFO((o).detail);        \
    REQUIRE_FALSE((o).ok()); \
  } while (0)

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("postgres step fences the old primary and promotes the standby once",
          "[steps][postgres]") {
  PgNodes pg;
  StepRig rig;
  const int a = pg.a().port, b = pg.b().port;
  const auto step = fo::test::pg_step(pg, fo::test::password_file(pg));
  REQUIRE(PgNodes::sql(a, "CREATE TABLE t(x int)") == "OK");
  REQUIRE(PgNodes::sql(a, "INSERT INTO t VALUES (1)") == "OK");
  // A client in the middle of a write transaction on the old primary.
  const std::string conninfo =
      "host=127.0.0.1 dbname=postgres user=postgres port=" + std::to_string(a);
  std::unique_ptr<PGconn, decltype(&PQfinish)> writer(PQconnectdb(conninfo.c_str()), &PQfinish);
  REQUIRE(PQstatus(writer.get()) == CONNECTION_OK);
  PQclear(PQexec(writer.get(), "BEGIN"));
  PQclear(PQexec(writer.get(), "INSERT INTO t VALUES (99)"));
  // Committed just before the failover (asynchronous commit): must not be lost.
  REQUIRE(PgNodes::sql(a, "INSERT INTO t VALUES (2)") == "OK");

  const auto check = rig.run(StepMode::check, step, fo::test::pg_ctx(Site::secondary));
  CHECK_OK(check);
  CHECK(contains(check.detail, "would promote secondary"));

  const auto first = rig.run(StepMode::apply, step, fo::test::pg_ctx(Site::secondary));
  REQUIRE_OK(first);
  CHECK_FALSE(first.already_done);
  CHECK(contains(first.detail, "promoted secondary"));
  CHECK(contains(first.detail, "fenced primary (read-only"));
  CHECK(contains(first.detail, "1 session ended"));

  // The open transaction was ended, the old primary refuses writes, the new one has the data.
  std::unique_ptr<PGresult, decltype(&PQclear)> commit(PQexec(writer.get(), "COMMIT"), &PQclear);
  CHECK(PQresultStatus(commit.get()) != PGRES_COMMAND_OK);
  CHECK(contains(PgNodes::sql(a, "INSERT INTO t VALUES (3)"), "read-only transaction"));
  CHECK(PgNodes::sql(a, "SELECT pg_is_in_recovery()") == "f");
  CHECK(PgNodes::sql(b, "SELECT pg_is_in_recovery()") == "f");
  CHECK(PgNodes::sql(b, "SELECT string_agg(x::text, ',' ORDER BY x) FROM t") == "1,2");
  CHECK(PgNodes::sql(b, "INSERT INTO t VALUES (4)") == "OK");
  const std::string timeline = fo::test::timeline_of(b);
  CHECK(timeline == "00000002");

  // Re-run (a daemon killed before the intent log said "done"): nothing is promoted again.
  const auto again = rig.run(StepMode::apply, step, fo::test::pg_ctx(Site::secondary));
  CHECK_OK(again);
  CHECK(again.already_done);
  CHECK(contains(again.detail, "secondary is the writable primary, primary is read-only"));
  CHECK(fo::test::timeline_of(b) == timeline);

  const auto observed = rig.run(StepMode::observe, step, fo::test::pg_ctx(Site::secondary));
  CHECK_OK(observed);
  const auto drift = rig.run(StepMode::observe, step, fo::test::pg_ctx(Site::primary));
  CHECK_FAILED(drift);
  CHECK(contains(drift.detail, "secondary writable but primary is active"));
}

TEST_CASE("postgres step lag gate refuses automatic promotion and forced apply overrides it",
          "[steps][postgres]") {
  PgNodes pg;
  StepRig rig;
  const int a = pg.a().port, b = pg.b().port;
  auto step = fo::test::pg_step(pg, fo::test::password_file(pg));
  step.postgres.max_lag_bytes = 1024 * 1024;
  step.postgres.max_lag = "1MB";
  REQUIRE(PgNodes::sql(b, "SELECT pg_wal_replay_pause()").empty());  // returns void
  REQUIRE(PgNodes::sql(a, "CREATE TABLE big AS SELECT generate_series(1, 100000) AS x") == "OK");

  const auto check = rig.run(StepMode::check, step, fo::test::pg_ctx(Site::secondary));
  CHECK_FAILED(check);
  CHECK_FALSE(check.retryable);
  const auto refused = rig.run(StepMode::apply, step, fo::test::pg_ctx(Site::secondary));
  REQUIRE_FAILED(refused);
  CHECK_FALSE(refused.retryable);
  CHECK(contains(refused.detail, "refused: secondary replication lag"));
  CHECK(contains(refused.detail, "> max_lag 1MB"));
  CHECK(contains(refused.detail, "replay is paused"));
  // Nothing changed: the primary still takes writes, the standby is still a paused standby.
  CHECK(PgNodes::sql(a, "INSERT INTO big VALUES (0)") == "OK");
  CHECK(PgNodes::sql(b, "SELECT pg_is_in_recovery()") == "t");
  CHECK(PgNodes::sql(b, "SELECT pg_is_wal_replay_paused()") == "t");

  const auto forced = rig.run(StepMode::apply, step, fo::test::pg_ctx(Site::secondary, true));
  REQUIRE_OK(forced);
  CHECK(contains(forced.detail, "forced past the lag gate (lag "));
  CHECK(contains(forced.detail, "> max_lag 1MB)"));
  CHECK(contains(forced.detail, "fenced primary"));
  CHECK(PgNodes::sql(b, "SELECT pg_is_in_recovery()") == "f");
  // Promotion replayed everything the standby had received, the last row included.
  CHECK(PgNodes::sql(b, "SELECT count(*) FROM big") == "100001");
}

TEST_CASE("postgres step promotes when the old primary is down", "[steps][postgres]") {
  PgNodes pg;
  StepRig rig;
  const auto step = fo::test::pg_step(pg, fo::test::password_file(pg));
  REQUIRE(PgNodes::sql(pg.a().port, "CREATE TABLE t AS SELECT 1 AS x") == "OK");
  REQUIRE(PgNodes::poll_until(std::chrono::seconds(20), [&] {
    return PgNodes::sql(pg.b().port, "SELECT count(*) FROM t") == "1";
  }));
  pg.stop(pg.a());

  const auto out = rig.run(StepMode::apply, step, fo::test::pg_ctx(Site::secondary));
  REQUIRE_OK(out);
  CHECK(contains(out.detail, "promoted secondary"));
  CHECK(contains(out.detail, "primary unreachable (connection refused): not fenced"));
  CHECK(PgNodes::sql(pg.b().port, "INSERT INTO t VALUES (2)") == "OK");
  const auto observed = rig.run(StepMode::observe, step, fo::test::pg_ctx(Site::secondary));
  CHECK_OK(observed);
}

TEST_CASE("postgres step fails back after pg-rewind.sh resynchronised the old primary",
          "[steps][postgres]") {
  PgNodes pg;
  StepRig rig;
  const int a = pg.a().port, b = pg.b().port;
  const auto step = fo::test::pg_step(pg, fo::test::password_file(pg));
  REQUIRE(PgNodes::sql(a, "CREATE TABLE t(x int)") == "OK");
  REQUIRE(PgNodes::sql(a, "INSERT INTO t VALUES (1)") == "OK");
  {
    const auto outcome = rig.run(StepMode::apply, step, fo::test::pg_ctx(Site::secondary));
    REQUIRE_OK(outcome);
  }
  REQUIRE(PgNodes::sql(b, "INSERT INTO t VALUES (10), (11)") == "OK");

  // Not yet resynchronised: the failback is refused and changes nothing.
  const auto early = rig.run(StepMode::check, step, fo::test::pg_ctx(Site::primary));
  CHECK_FAILED(early);
  CHECK_FALSE(early.retryable);
  CHECK(contains(early.detail, "resynchronise primary as a standby of secondary"));
  const auto refused = rig.run(StepMode::apply, step, fo::test::pg_ctx(Site::primary));
  CHECK_FAILED(refused);
  CHECK(PgNodes::sql(b, "INSERT INTO t VALUES (12)") == "OK");

  const std::string source =
      "host=127.0.0.1 port=" + std::to_string(b) + " user=postgres dbname=postgres";
  const int rc = pg.run_logged({"/bin/bash", FO_PG_REWIND_SCRIPT, "--pgdata", pg.a().data,
                                "--source", source, "--start", "true"},
                               "pg-rewind");
  REQUIRE(rc == 0);
  pg.start(pg.a());
  REQUIRE(pg.wait_streaming(pg.b()));
  CHECK(PgNodes::sql(a, "SELECT pg_is_in_recovery()") == "t");
  REQUIRE(PgNodes::poll_until(std::chrono::seconds(20),
                              [&] { return PgNodes::sql(a, "SELECT count(*) FROM t") == "4"; }));

  const auto ready = rig.run(StepMode::check, step, fo::test::pg_ctx(Site::primary));
  CHECK_OK(ready);
  const auto back = rig.run(StepMode::apply, step, fo::test::pg_ctx(Site::primary));
  REQUIRE_OK(back);
  CHECK(contains(back.detail, "promoted primary"));
  CHECK(contains(back.detail, "fenced secondary (read-only"));
  // The writes made on the secondary during the failover are on the primary, which is writable.
  CHECK(PgNodes::sql(a, "SELECT string_agg(x::text, ',' ORDER BY x) FROM t") == "1,10,11,12");
  CHECK(PgNodes::sql(a, "INSERT INTO t VALUES (20)") == "OK");
  CHECK(contains(PgNodes::sql(b, "INSERT INTO t VALUES (21)"), "read-only transaction"));
  {
    const auto outcome = rig.run(StepMode::observe, step, fo::test::pg_ctx(Site::primary));
    CHECK_OK(outcome);
  }
}

TEST_CASE("postgres step reports split brain as drift and fences it on apply",
          "[steps][postgres]") {
  PgNodes pg;
  StepRig rig;
  const auto step = fo::test::pg_step(pg, fo::test::password_file(pg));
  const auto healthy = rig.run(StepMode::observe, step, fo::test::pg_ctx(Site::primary));
  CHECK_OK(healthy);
  CHECK(contains(healthy.detail, "secondary is a standby"));

  // Someone promotes the standby by hand while the primary still takes writes.
  REQUIRE(PgNodes::sql(pg.b().port, "SELECT pg_promote(true, 30)") == "t");
  for (Site target : {Site::primary, Site::secondary}) {
    const auto out = rig.run(StepMode::observe, step, fo::test::pg_ctx(target));
    CHECK_FAILED(out);
    CHECK(out.detail == "both writable: split brain");
  }
  const auto fenced = rig.run(StepMode::apply, step, fo::test::pg_ctx(Site::secondary));
  CHECK_OK(fenced);
  CHECK(contains(fenced.detail, "both writable: split brain: fenced primary"));
  {
    const auto outcome = rig.run(StepMode::observe, step, fo::test::pg_ctx(Site::secondary));
    CHECK_OK(outcome);
  }
}

TEST_CASE("postgres step refuses unsafe or wrong password files", "[steps][postgres]") {
  PgNodes pg;
  StepRig rig;
  const std::string open_file = fo::test::password_file(pg, fo::test::kStepPassword, 0644);
  const auto step = fo::test::pg_step(pg, open_file);
  for (StepMode mode : {StepMode::apply, StepMode::check, StepMode::observe}) {
    const auto out = rig.run(mode, step, fo::test::pg_ctx(Site::secondary));
    CHECK_FAILED(out);
    CHECK_FALSE(out.retryable);
    CHECK(contains(out.detail, "password_file"));
    CHECK(contains(out.detail, "0644"));
  }
  CHECK(PgNodes::sql(pg.b().port, "SELECT pg_is_in_recovery()") == "t");

  const auto wrong = fo::test::pg_step(pg, fo::test::password_file(pg, "not-the-password"));
  const auto denied = rig.run(StepMode::apply, wrong, fo::test::pg_ctx(Site::secondary));
  CHECK_FAILED(denied);
  CHECK_FALSE(denied.retryable);
  CHECK(contains(denied.detail, "password authentication failed"));
  CHECK_FALSE(contains(denied.detail, "not-the-password"));
  CHECK(PgNodes::sql(pg.b().port, "SELECT pg_is_in_recovery()") == "t");

  const auto good = fo::test::pg_step(pg, fo::test::password_file(pg));
  {
    const auto outcome = rig.run(StepMode::check, good, fo::test::pg_ctx(Site::secondary));
    CHECK_OK(outcome);
  }
}
