// Test helper: the postgres step plugin on its own sd-event loop; runs one apply, check or
// observe attempt to its single outcome.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "actions/postgres/postgres_step.hpp"
#include "daemon/platform/event.hpp"
#include "tests/platform/loop_util.hpp"
#include "tests/support/pg_cluster.hpp"

namespace fo::test {

using PgNodes = PgCluster;

enum class StepMode { apply, check, observe };

struct StepRig {
  platform::EventPtr loop = platform::make_event();
  std::unique_ptr<actions::StepPlugin> plugin = actions::make_postgres_step_plugin(loop.get());

  actions::StepOutcome run(StepMode mode, const config::Step& step, const actions::StepContext& ctx,
                           std::chrono::milliseconds limit = std::chrono::seconds(45)) {
    // The loop's clock (sd_event_now) only advances when the loop runs; after the test did
    // blocking work, timers armed now would be due at once.
    sd_event_run(loop.get(), 0);
    std::optional<actions::StepOutcome> out;
    int calls = 0;
    auto done = [&](actions::StepOutcome o) {
      ++calls;
      out = std::move(o);
    };
    std::unique_ptr<actions::StepAttempt> attempt =
        mode == StepMode::apply   ? plugin->apply(step, ctx, done)
        : mode == StepMode::check ? plugin->check(step, ctx, done)
                                  : plugin->observe(step, ctx, done);
    REQUIRE(attempt);
    REQUIRE(calls == 0);  // never synchronous
    REQUIRE(run_until(
        loop.get(), [&] { return calls > 0; }, limit));
    for (int i = 0; i < 3; ++i) sd_event_run(loop.get(), 10 * 1000);  // no second call follows
    REQUIRE(calls == 1);
    UNSCOPED_INFO("outcome: " << (out->ok() ? "ok" : "failed")
                              << (out->already_done ? " (already done)" : "")
                              << (out->retryable ? "" : " (not retryable)") << ": " << out->detail);
    // A secret never shows up in what the step reports.
    CHECK(out->detail.find(kStepPassword) == std::string::npos);
    CHECK(out->output.find(kStepPassword) == std::string::npos);
    return *out;
  }
};

inline config::PostgresTarget target_of(const PgNodes::Node& n, const std::string& password_file) {
  config::PostgresTarget t;
  t.host = "127.0.0.1";
  t.port = n.port;
  t.user = kStepUser;
  t.password_file = password_file;
  t.configured = true;
  return t;
}

// A step whose primary is node a and secondary node b, as the `failoverd` user.
inline config::Step pg_step(PgNodes& pg, const std::string& password_file) {
  config::Step s;
  s.kind = "postgres";
  s.name = "database";
  s.timeout = std::chrono::seconds(30);
  s.postgres.primary = target_of(pg.a(), password_file);
  s.postgres.secondary = target_of(pg.b(), password_file);
  return s;
}

inline actions::StepContext pg_ctx(core::Site target, bool forced = false) {
  actions::StepContext c;
  c.group = "shop";
  c.target = target;
  c.from = target == core::Site::primary ? core::Site::secondary : core::Site::primary;
  c.phase = target == core::Site::primary ? core::Phase::failback : core::Phase::failover;
  c.forced = forced;
  c.plan_id = 1;
  c.idempotency_key = "shop/1/0";
  return c;
}

inline std::string password_file(PgNodes& pg, const std::string& content = kStepPassword,
                                 mode_t mode = 0600) {
  return pg.dir().write("step.pass", content + "\n", mode);
}

inline std::string timeline_of(int port) {
  return PgNodes::sql(port, "SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)");
}

}  // namespace fo::test
