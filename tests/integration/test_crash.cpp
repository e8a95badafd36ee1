// Crash safety of plans: the real failoverd is killed with SIGKILL in the middle of every step
// of a failover (before the step's effect, and after it but before the step was verified), then
// restarted. The plan must complete, every effect must have happened exactly once, and the
// history must be complete. Steps are exec hooks that use FAILOVER_IDEMPOTENCY_KEY the way the
// built-in kinds use their own observation: an effect already in place is not applied again.
#include <signal.h>
#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/integration/harness.hpp"
#include "tests/probes/test_http_server.hpp"

using nlohmann::json;
using namespace fo::test;

namespace {

constexpr int kSteps = 4;

std::string config_text(const TempDir& dir, int primary_port, int secondary_port) {
  std::string cfg = "[daemon]\nstate_db = \"" + (dir / "state.db") + "\"\ncontrol_socket = \"" +
                    (dir / "control.sock") +
                    "\"\nlog_level = \"debug\"\nmetrics_listen = \"\"\n"
                    "[[location]]\nname = \"here\"\nkind = \"local\"\n"
                    "[[group]]\nname = \"shop\"\ninterval = \"200ms\"\n"
                    "[group.primary]\nprobes = [ { kind = \"http\", url = \"http://127.0.0.1:" +
                    std::to_string(primary_port) +
                    "/health\", timeout = \"200ms\" } ]\n"
                    "[group.secondary]\nprobes = [ { kind = \"http\", url = "
                    "\"http://127.0.0.1:" +
                    std::to_string(secondary_port) +
                    "/health\", timeout = \"200ms\" } ]\n"
                    "[group.policy]\nfailover_after = 2\nfailback_stable = \"1h\"\n";
  for (int i = 0; i < kSteps; ++i) {
    cfg += "[[group.failover]]\nkind = \"exec\"\nname = \"s" + std::to_string(i) +
           "\"\nargv = [\"" + (dir / "step.sh") + "\", \"s" + std::to_string(i) +
           "\"]\ntimeout = \"30s\"\n";
  }
  return cfg;
}

// The step: optionally blocks before ("hold-before-<name>") or after ("hold-after-<name>") its
// effect until killed; the effect is one line per idempotency key in effects.log.
void write_step_script(const TempDir& dir) {
  const std::string d = dir.path();
  write_file(dir / "step.sh",
             "#!/bin/sh\n"
             "echo \"$1 $FAILOVER_IDEMPOTENCY_KEY\" >> " +
                 d +
                 "/attempts.log\n"
                 "hold() { if [ -e " +
                 d + "/hold-$1 ]; then echo $$ > " + d +
                 "/blocked-$1; while :; do sleep 0.05; done; fi; }\n"
                 "hold before-$1\n"
                 "if ! grep -qx \"$1 $FAILOVER_IDEMPOTENCY_KEY\" " +
                 d +
                 "/effects.log 2>/dev/null; then\n"
                 "  echo \"$1 $FAILOVER_IDEMPOTENCY_KEY\" >> " +
                 d +
                 "/effects.log\nfi\n"
                 "hold after-$1\n",
             0755);
}

std::vector<std::vector<std::string>> query(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::vector<std::string>> rows;
  REQUIRE(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      auto* t = sqlite3_column_text(st, i);
      row.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    rows.push_back(row);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

std::string group_state(const TempDir& dir) {
  RunResult r = run({FAILOVERCTL_BIN, "--socket", dir / "control.sock", "--json", "status"}, dir);
  try {
    json s = json::parse(r.out);
    return s["groups"][0].value("state", "");
  } catch (const json::exception&) {
    return "";
  }
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

void crash_at(const std::string& hold) {
  INFO("killed while blocked at " << hold);
  TempDir dir;
  write_step_script(dir);
  TestHttpServer secondary;
  secondary.route("/health", {});
  auto primary = std::make_unique<TestHttpServer>();
  primary->route("/health", {});
  write_file(dir / "failoverd.toml", config_text(dir, primary->port(), secondary.port()));
  write_file(dir / ("hold-" + hold), "");
  {
    Process daemon({FAILOVERD_BIN, "--config", dir / "failoverd.toml"}, {}, dir / "daemon1.log");
    REQUIRE(wait_until([&] { return group_state(dir) == "primary_active"; }, 30s));
    primary.reset();  // the primary goes down: failover starts
    REQUIRE(wait_until([&] { return std::filesystem::exists(dir / ("blocked-" + hold)); }, 30s));
    daemon.signal(SIGKILL);
    REQUIRE(daemon.wait(10s) == 128 + SIGKILL);
  }
  // The orphaned step is still blocked; a real host would have killed it with the daemon's
  // cgroup. Kill it, and let the step pass from now on.
  const pid_t step_pid = std::stoi(read_file(dir / ("blocked-" + hold)));
  kill(step_pid, SIGKILL);
  std::filesystem::remove(dir / ("hold-" + hold));

  Process daemon({FAILOVERD_BIN, "--config", dir / "failoverd.toml"}, {}, dir / "daemon2.log");
  REQUIRE(wait_until([&] { return group_state(dir) == "secondary_active"; }, 30s));

  // Every effect exactly once, in order, all under the one plan's keys.
  const auto effects = lines(read_file(dir / "effects.log"));
  REQUIRE(effects.size() == kSteps);
  std::string plan_key;
  for (int i = 0; i < kSteps; ++i) {
    const std::string name = "s" + std::to_string(i);
    CHECK(effects[i].rfind(name + " shop/", 0) == 0);
    const std::string key = effects[i].substr(name.size() + 1);
    CHECK(key.substr(key.rfind('/') + 1) == std::to_string(i));
    const std::string plan = key.substr(0, key.rfind('/'));
    if (plan_key.empty()) plan_key = plan;
    CHECK(plan == plan_key);
  }
  // Steps verified before the kill did not run again; the interrupted one ran once more.
  const auto attempts = lines(read_file(dir / "attempts.log"));
  const int blocked_index = hold.back() - '0';
  CHECK(attempts.size() == static_cast<std::size_t>(kSteps + 1));
  for (const auto& a : attempts) {
    const int idx = a[1] - '0';
    CHECK(std::count(attempts.begin(), attempts.end(), a) == (idx == blocked_index ? 2 : 1));
  }

  daemon.signal(SIGTERM);
  CHECK(daemon.wait(10s) == 0);
  const std::string db = dir / "state.db";
  // The intent log: one row per step, all verified, the interrupted one begun twice.
  auto intents = query(db, "SELECT step_index, begun, done_ms > 0 FROM intents ORDER BY 1");
  REQUIRE(intents.size() == kSteps);
  for (int i = 0; i < kSteps; ++i) {
    CHECK(intents[i][1] == (i == blocked_index ? "2" : "1"));
    CHECK(intents[i][2] == "1");
  }
  // History: the whole failover is there, once.
  auto transitions = query(db, "SELECT to_state FROM transitions ORDER BY id");
  std::vector<std::string> to;
  for (const auto& t : transitions) to.push_back(t[0]);
  CHECK(std::count(to.begin(), to.end(), "failing_over") == 1);
  CHECK(std::count(to.begin(), to.end(), "secondary_active") == 1);
  auto ok_steps = query(db,
                        "SELECT step_index, result FROM action_steps WHERE stage = 'apply' AND "
                        "result IN ('ok', 'skipped') ORDER BY step_index, ended_ms");
  std::set<std::string> verified;
  for (const auto& r : ok_steps) verified.insert(r[0]);
  CHECK(verified.size() == kSteps);
}

}  // namespace

TEST_CASE("kill -9 before the effect of each failover step: the plan resumes, effects once") {
  for (int i = 0; i < kSteps; ++i) {
    DYNAMIC_SECTION("step " << i) {
      crash_at("before-s" + std::to_string(i));
    }
  }
}

TEST_CASE("kill -9 after the effect of each failover step, before it was verified") {
  for (int i = 0; i < kSteps; ++i) {
    DYNAMIC_SECTION("step " << i) {
      crash_at("after-s" + std::to_string(i));
    }
  }
}
