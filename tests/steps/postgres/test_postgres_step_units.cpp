// The postgres step without a server: its config keys (defaults, errors with file:line:column,
// the example file), LSN helpers and the pure decision over two site states.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "actions/postgres/pg_state.hpp"
#include "daemon/config/config.hpp"

using fo::actions::pg::Decision;
using fo::actions::pg::Plan;
using fo::actions::pg::SiteState;
using fo::config::parse_config;

namespace {

constexpr std::string_view kGroup = R"([[group]]
name = "db"
[group.primary]
probes = [ { kind = "tcp", address = "192.0.2.11:5432" } ]
[group.secondary]
probes = [ { kind = "tcp", address = "192.0.2.12:5432" } ]
)";

std::string errors_of(const std::string& step) {
  try {
    (void)parse_config(std::string(kGroup) + step, "db.toml");
  } catch (const fo::config::ConfigException& e) {
    return e.what();
  }
  return "OK";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

SiteState primary_state(bool read_only, std::uint64_t lsn, std::uint32_t timeline = 1) {
  SiteState s;
  s.reachable = true;
  s.read_only = read_only;
  s.current = lsn;
  s.timeline = timeline;
  s.system_id = "42";
  return s;
}

SiteState standby_state(std::uint64_t received, std::uint64_t replayed, std::uint32_t tli = 1) {
  SiteState s;
  s.reachable = true;
  s.in_recovery = true;
  s.read_only = false;
  s.received = received;
  s.replayed = replayed;
  s.receiver_status = "streaming";
  s.received_tli = tli;
  s.system_id = "42";
  return s;
}

SiteState down_state() {
  SiteState s;
  s.error = "connection refused";
  return s;
}

Decision decide(const SiteState& t, const SiteState& o, bool forced = false,
                const std::string& max_lag = "16MB") {
  fo::config::PostgresStep step;
  if (max_lag == "10s") {
    step.max_lag_bytes = 0;
    step.max_lag_time = std::chrono::seconds(10);
  }
  step.max_lag = max_lag;
  return fo::actions::pg::decide(t, o, step, forced, "secondary", "primary");
}

}  // namespace

TEST_CASE("postgres step config with defaults and both target forms", "[steps][postgres][config]") {
  const auto config = parse_config(std::string(kGroup) + R"(
[[group.failover]]
kind = "postgres"
primary = { host = "192.0.2.11", user = "failoverd", password_file = "/etc/failoverd/pg.pass" }
secondary = "host=/run/postgresql port=5433 dbname=app user=failoverd"
)",
                                   "db.toml");
  const auto& step = config.groups[0].steps_for(fo::core::Phase::failover)[0];
  REQUIRE(step.kind == "postgres");
  const auto& pg = step.postgres;
  CHECK(pg.action == "promote");
  CHECK(pg.fence == "read_only");
  CHECK(pg.max_lag_bytes == 16 * 1024 * 1024);
  CHECK(pg.max_lag == "16MB");
  CHECK(pg.connect_timeout == std::chrono::seconds(5));
  CHECK(pg.primary.host == "192.0.2.11");
  CHECK(pg.primary.port == 5432);
  CHECK(pg.primary.dbname == "postgres");
  CHECK(pg.primary.user == "failoverd");
  CHECK(pg.primary.password_file == "/etc/failoverd/pg.pass");
  CHECK(pg.secondary.conninfo == "host=/run/postgresql port=5433 dbname=app user=failoverd");

  const auto timed = parse_config(std::string(kGroup) + R"(
[[group.failover]]
kind = "postgres"
primary = "host=192.0.2.11"
secondary = "hostaddr=192.0.2.12 host=db2.example"
max_lag = "10s"
fence = "none"
connect_timeout = "2s"
)",
                                  "db.toml");
  const auto& t = timed.groups[0].steps_for(fo::core::Phase::failover)[0].postgres;
  CHECK(t.max_lag_bytes == 0);
  CHECK(t.max_lag_time == std::chrono::seconds(10));
  CHECK(t.fence == "none");
  CHECK(t.connect_timeout == std::chrono::seconds(2));
}

TEST_CASE("postgres step config errors name file line and column", "[steps][postgres][config]") {
  // kGroup has 6 lines; the step table starts on line 7.
  const std::string head = "[[group.failover]]\nkind = \"postgres\"\n";
  const std::string both = "primary = \"host=192.0.2.11\"\nsecondary = \"host=192.0.2.12\"\n";
  CHECK(contains(errors_of(head + "primary = \"host=192.0.2.11\"\n"),
                 "db.toml:7:1: missing required key 'secondary'"));
  CHECK(contains(errors_of(head + both + "max_lag = \"lots\"\n"),
                 "db.toml:11:11: group.failover.max_lag: 'lots' must be a size like"));
  CHECK(contains(errors_of(head + both + "fence = \"stop\"\n"), "db.toml:11:9: "));
  CHECK(contains(errors_of(head + both + "action = \"demote\"\n"), "db.toml:11:10: "));
  CHECK(contains(errors_of(head + both + "max_lagg = \"1MB\"\n"),
                 "db.toml:11:1: unknown key 'max_lagg'"));
  CHECK(contains(errors_of(head + "primary = { host = \"db1.example\" }\n" +
                           "secondary = \"host=192.0.2.12\"\n"),
                 "db.toml:9:20: group.failover.primary.host: 'db1.example' must be an IP address"));
  CHECK(contains(errors_of(head + "primary = \"host=192.0.2.11 password=hunter2\"\n" +
                           "secondary = \"host=192.0.2.12\"\n"),
                 "db.toml:9:11: group.failover.primary: must not contain password"));
  CHECK(contains(
      errors_of(head + "primary = \"host=db1.example\"\n" + "secondary = \"host=192.0.2.12\"\n"),
      "must be IP addresses or socket directories"));
  CHECK(contains(errors_of(head + "primary = \"postgresql://u:p@192.0.2.11/db\"\n" +
                           "secondary = \"host=192.0.2.12\"\n"),
                 "not a URI"));
  CHECK(contains(errors_of(head + "primary = { host = \"192.0.2.11\", pasword_file = \"/x\" }\n" +
                           "secondary = \"host=192.0.2.12\"\n"),
                 "db.toml:9:"));
  CHECK(contains(errors_of(head + "primary = { host = \"192.0.2.11\", password_file = \"x\" }\n" +
                           "secondary = \"host=192.0.2.12\"\n"),
                 "must be an absolute path"));
  CHECK(contains(errors_of(head + "primary = 5432\nsecondary = \"host=192.0.2.12\"\n"),
                 "db.toml:9:11: group.failover.primary: expected a conninfo string or a table"));
}

TEST_CASE("postgres step example configuration loads", "[steps][postgres][config]") {
  std::ifstream in(FO_PG_EXAMPLE);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const auto config = parse_config(text.str(), "steps-postgres.toml");
  const auto& group = config.groups.at(0);
  CHECK(group.steps_for(fo::core::Phase::failover).at(0).kind == "postgres");
  CHECK(group.steps_for(fo::core::Phase::failback).at(1).postgres.max_lag == "1MB");
}

TEST_CASE("postgres step LSN helpers", "[steps][postgres]") {
  using fo::actions::pg::format_lsn;
  using fo::actions::pg::parse_lsn;
  CHECK(parse_lsn("0/3000060") == 0x3000060u);
  CHECK(parse_lsn("1A/0") == (std::uint64_t(0x1A) << 32));
  CHECK_FALSE(parse_lsn("0/3000060x"));
  CHECK_FALSE(parse_lsn("garbage"));
  CHECK_FALSE(parse_lsn(""));
  CHECK(format_lsn(0x1A00000010ULL) == "1A/10");
  CHECK(fo::actions::pg::format_bytes(16 * 1024 * 1024) == "16 MB");
}

TEST_CASE("postgres step decision over both sites' states", "[steps][postgres]") {
  SECTION("a caught-up streaming standby is promoted with the writable primary fenced") {
    const auto d = decide(standby_state(100, 100), primary_state(false, 100));
    CHECK(d.plan == Plan::promote);
    CHECK(d.fence);
    CHECK(d.catch_up);
    CHECK(d.detail == "secondary is a standby, lag 0 B <= max_lag 16MB");
  }
  SECTION("lag against the primary above max_lag is refused, not retryable, unless forced") {
    const auto d = decide(standby_state(100, 100), primary_state(false, 100 + (32 << 20)));
    CHECK(d.plan == Plan::refuse);
    CHECK_FALSE(d.retryable);
    CHECK(contains(d.detail, "lag 32 MB > max_lag 16MB"));
    const auto f = decide(standby_state(100, 100), primary_state(false, 100 + (32 << 20)), true);
    CHECK(f.plan == Plan::promote);
    CHECK(f.notes == "forced past the lag gate (lag 32 MB > max_lag 16MB)");
  }
  SECTION("with the primary down, the lag is what was received but not replayed") {
    const auto d = decide(standby_state(100 + (1 << 20), 100), down_state());
    CHECK(d.plan == Plan::promote);
    CHECK_FALSE(d.fence);
    CHECK_FALSE(d.catch_up);
    CHECK(d.notes == "primary unreachable (connection refused): not fenced");
  }
  SECTION("a time gate without any replayed transaction has an unknown lag") {
    SiteState t = standby_state(200, 100);
    const auto d = decide(t, down_state(), false, "10s");
    CHECK(d.plan == Plan::refuse);
    CHECK(contains(d.detail, "lag unknown"));
    t.replay_age = 3.5;
    CHECK(decide(t, down_state(), false, "10s").plan == Plan::promote);
    t.replay_age = 12;
    CHECK(decide(t, down_state(), false, "10s").plan == Plan::refuse);
  }
  SECTION("already done, split brain, fenced former primary") {
    CHECK(decide(primary_state(false, 5, 2), primary_state(true, 9)).plan == Plan::already_done);
    CHECK(decide(primary_state(false, 5, 2), down_state()).plan == Plan::already_done);
    CHECK(decide(primary_state(false, 5, 2), primary_state(false, 9)).plan == Plan::fence_other);
    const auto stale = decide(primary_state(true, 9, 1), primary_state(false, 5, 2));
    CHECK(stale.plan == Plan::refuse);
    CHECK(contains(stale.detail, "resynchronise secondary as a standby of primary"));
    CHECK(decide(primary_state(true, 9, 2), primary_state(true, 9, 1)).plan ==
          Plan::unfence_target);
    CHECK(decide(primary_state(true, 9, 2), down_state()).plan == Plan::refuse);
    CHECK(decide(primary_state(true, 9, 2), down_state(), true).plan == Plan::unfence_target);
  }
  SECTION("a standby that does not stream from the current primary is refused") {
    SiteState t = standby_state(100, 100, 1);
    const auto wrong_timeline = decide(t, primary_state(false, 100, 2));
    CHECK(wrong_timeline.plan == Plan::refuse);
    CHECK(contains(wrong_timeline.detail, "not a streaming standby of primary"));
    t.receiver_status = "";
    t.received_tli.reset();
    CHECK(decide(t, primary_state(false, 100)).plan == Plan::refuse);
    t.system_id = "7";
    const auto other = decide(standby_state(100, 100), [] {
      SiteState p = primary_state(false, 100);
      p.system_id = "7";
      return p;
    }());
    CHECK(contains(other.detail, "different clusters"));
  }
  SECTION("an unreachable target is retryable unless authentication failed") {
    CHECK(decide(down_state(), primary_state(false, 1)).retryable);
    SiteState denied = down_state();
    denied.permanent_error = true;
    CHECK_FALSE(decide(denied, primary_state(false, 1)).retryable);
  }
  SECTION("drift") {
    using fo::actions::pg::drift;
    CHECK(drift(primary_state(false, 1), primary_state(true, 1), "secondary", "primary").empty());
    CHECK(drift(primary_state(false, 1), primary_state(false, 1), "secondary", "primary") ==
          "both writable: split brain");
    CHECK(contains(drift(standby_state(1, 1), primary_state(false, 1), "secondary", "primary"),
                   "primary writable but secondary is active"));
  }
}
