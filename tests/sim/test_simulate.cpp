// run_simulate end to end: exact JSON lines, the table form, several groups, input errors, and
// the seed 004 incident through the example config.
#include <catch2/catch.hpp>

#include "sim_test_util.hpp"

using namespace fo::sim;
using namespace fo::sim::test;
using nlohmann::json;

namespace {

// Primary healthy until 30 s, then down from every location; secondary always healthy.
std::string primary_dies(const std::string& group = "shop", int until_s = 120) {
  std::string csv = "t,group,site,location,ok\n";
  for (int t = 0; t <= until_s; t += 10)
    for (const char* loc : {"ams", "fra", "nyc"}) {
      csv +=
          std::to_string(t) + "," + group + ",primary," + loc + "," + (t < 40 ? "1" : "0") + "\n";
      csv += std::to_string(t) + "," + group + ",secondary," + loc + ",1\n";
    }
  return csv;
}

json summary_of(const std::vector<json>& lines, const std::string& group) {
  for (const auto& j : lines)
    if (j["event"] == "summary" && j["group"] == group) return j;
  FAIL("no summary for " << group);
  return {};
}

}  // namespace

TEST_CASE("simulate: the primary dies -> warm, failover, steps, summary as exact JSON lines") {
  TempDir dir;
  auto cfg = fo::config::parse_config(kSmallConfig, "small.toml");
  auto r = simulate(cfg, dir.write("t.csv", primary_dies()), true);
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  const std::vector<std::string> expected = {
      R"j({"t":40,"group":"shop","event":"transition","from":"primary_active","to":"primary_degraded","reason":"warming secondary: primary 0/3 below warm_below 100%"})j",
      R"j({"t":40,"group":"shop","event":"action","phase":"warm","step":null})j",
      R"j({"t":60,"group":"shop","event":"transition","from":"primary_degraded","to":"failing_over","reason":"failing over: primary 0/3 for 3 rounds, secondary 3/3"})j",
      R"j({"t":60,"group":"shop","event":"action","phase":"failover","step":"promote-sql"})j",
      R"j({"t":60,"group":"shop","event":"action","phase":"failover","step":"switch-dns"})j",
      R"j({"t":60,"group":"shop","event":"transition","from":"failing_over","to":"secondary_active","reason":"failed over to secondary: plan 2 (simulated)"})j",
      // Downtime: the rounds at 40 and 50 saw the serving primary down, and so did the round
      // at 60 that decided the (instant) failover; each counts until the next round.
      R"j({"event":"summary","group":"shop","failovers":1,"failbacks":0,"holds":0,"first_warm_t":40,"downtime_s":20})j",
  };
  CHECK(lines_of(r.out) == expected);
}

TEST_CASE("simulate: the table form shows offsets, events and a summary table") {
  TempDir dir;
  auto cfg = fo::config::parse_config(kSmallConfig, "small.toml");
  auto r = simulate(cfg, dir.write("t.csv", primary_dies()), false);
  REQUIRE(r.rc == 0);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 10);
  CHECK(lines[0] == "time        group  event       details");
  CHECK(lines[1] ==
        "+00:00:40   shop   transition  primary_active -> primary_degraded: warming secondary: "
        "primary 0/3 below warm_below 100%");
  CHECK(lines[2] == "+00:00:40   shop   action      warm: (no steps configured)");
  CHECK(lines[4] == "+00:01:00   shop   action      failover: promote-sql");
  CHECK(lines[7] == "");
  CHECK(lines[8] == "group  failovers  failbacks  holds  first warm    downtime");
  CHECK(lines[9] == "shop   1          0          0      +00:00:40     20s");
}

TEST_CASE("simulate: two groups with rows, one without, fractional times") {
  const std::string cfg_text = std::string(kSmallConfig) + R"(
[[group]]
name = "api"
interval = "2500ms"
locations = ["ams", "fra"]
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.11/", timeout = "1s" } ]
[group.secondary]
probes = [ { kind = "http", url = "https://198.51.100.21/", timeout = "1s" } ]
[group.policy]
failover_after = 2
[[group.failover]]
kind = "exec"
name = "api-dns"
argv = ["/bin/true"]

[[group]]
name = "quiet"
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.12/" } ]
[group.secondary]
probes = [ { kind = "http", url = "https://198.51.100.22/" } ]
)";
  auto cfg = fo::config::parse_config(cfg_text, "two.toml");
  // shop as before; api: primary fails from t=20 at both locations, rows every 2.5 s.
  std::string csv = "t,group,site,location,ok\n";
  for (int i = 0; i <= 48; ++i) {  // t = 0 .. 120 in 2.5 s steps
    const double t = i * 2.5;
    char ts[16];
    std::snprintf(ts, sizeof ts, "%g", t);
    if (i % 4 == 0)
      for (const char* loc : {"ams", "fra", "nyc"}) {
        csv += std::string(ts) + ",shop,primary," + loc + "," + (t < 40 ? "1" : "0") + "\n";
        csv += std::string(ts) + ",shop,secondary," + loc + ",1\n";
      }
    for (const char* loc : {"ams", "fra"}) {
      csv += std::string(ts) + ",api,primary," + loc + "," + (t < 20 ? "1" : "0") + "\n";
      csv += std::string(ts) + ",api,secondary," + loc + ",1\n";
    }
  }
  TempDir dir;
  auto r = simulate(cfg, dir.write("two.csv", csv), true);
  REQUIRE(r.rc == 0);
  const auto lines = json_lines(r.out);
  // api warms at the round that first sees the failure (t=20), fails over two rounds later.
  std::vector<json> api;
  for (const auto& j : lines)
    if (j["group"] == "api" && j["event"] != "summary") api.push_back(j);
  REQUIRE(api.size() == 5);
  CHECK(api[0]["t"] == 20);
  CHECK(api[0]["to"] == "primary_degraded");
  CHECK(api[2]["t"] == 22.5);
  CHECK(api[2]["to"] == "failing_over");
  CHECK(api[2]["reason"] == "failing over: primary 0/2 for 2 rounds, secondary 2/2");
  CHECK(api[3]["step"] == "api-dns");
  CHECK(api[4]["to"] == "secondary_active");
  // Events come out in time order across groups.
  double last = 0;
  for (const auto& j : lines)
    if (j.contains("t")) {
      CHECK(j["t"].get<double>() >= last);
      last = j["t"].get<double>();
    }
  CHECK(summary_of(lines, "shop")["failovers"] == 1);
  CHECK(summary_of(lines, "api")["failovers"] == 1);
  CHECK(summary_of(lines, "api")["first_warm_t"] == 20);
  // A group without rows is simulated too: health unknown, nothing happens.
  const json quiet = summary_of(lines, "quiet");
  CHECK(quiet == json::parse(R"({"event":"summary","group":"quiet","failovers":0,"failbacks":0,
                                 "holds":0,"first_warm_t":null,"downtime_s":0})"));
  // Summaries come last, one per group, in group name order.
  REQUIRE(lines.size() >= 3);
  CHECK(lines[lines.size() - 3]["group"] == "api");
  CHECK(lines[lines.size() - 2]["group"] == "quiet");
  CHECK(lines[lines.size() - 1]["group"] == "shop");
}

TEST_CASE("simulate: unknown group or location is an error naming the line") {
  TempDir dir;
  auto cfg = fo::config::parse_config(kSmallConfig, "small.toml");
  auto r = simulate(cfg,
                    dir.write("bad.csv",
                              "t,group,site,location,ok\n0,shop,primary,ams,1\n"
                              "1,shopp,primary,ams,1\n"),
                    true);
  CHECK(r.rc == 1);
  CHECK(r.err ==
        dir.file("bad.csv") + ":3: unknown group \"shopp\" (groups in small.toml: shop)\n");
  r = simulate(cfg,
               dir.write("bad2.csv",
                         "t,group,site,location,ok\n0,shop,primary,ams,1\n"
                         "0,shop,secondary,lon,1\n"),
               true);
  CHECK(r.rc == 1);
  CHECK(r.err == dir.file("bad2.csv") +
                     ":3: location \"lon\" is not a location of group \"shop\" (ams, fra, nyc)\n");
}

TEST_CASE("simulate: empty, header-only and bad timelines exit 1 with the position") {
  TempDir dir;
  auto cfg = fo::config::parse_config(kSmallConfig, "small.toml");
  auto r = simulate(cfg, dir.write("empty.csv", ""), false);
  CHECK(r.rc == 1);
  CHECK(r.err == dir.file("empty.csv") +
                     ":1: empty file: expected a header line t,group,site,location,ok\n");
  r = simulate(cfg, dir.write("header.csv", "t,group,site,location,ok\n"), false);
  CHECK(r.rc == 1);
  CHECK(r.err == dir.file("header.csv") + ":1: no data rows after the header\n");
  CHECK(r.out.empty());
  r = simulate(cfg, dir.write("yes.csv", "t,group,site,location,ok\n0,shop,primary,ams,yes\n"),
               false);
  CHECK(r.rc == 1);
  CHECK(r.err == dir.file("yes.csv") + ":2: ok must be 0 or 1, got \"yes\"\n");
}

// Seed 004 (tests/sim/fixtures/make_seed_004.py): the primary flapped from 09:12 for 26 minutes,
// was down 09:38-09:56, came back flaky and was stable from 10:10. With the example policy the
// secondary warms at the first degraded round, the group fails over once at the outage and fails
// back once, 45 minutes after 10:10.
TEST_CASE("simulate: seed incident 004 through the example config") {
  const std::string root = FO_SOURCE_DIR;
  const std::string fixture = root + "/tests/sim/fixtures/seed-004.csv";
  // The documented example is this fixture.
  CHECK(read_file(root + "/etc/examples/seed-004.csv") == read_file(fixture));
  auto cfg = fo::config::load_config_file(root + "/etc/examples/simulate.toml");
  auto r = simulate(cfg, fixture, true);
  REQUIRE(r.rc == 0);
  const auto lines = json_lines(r.out);
  constexpr int k0912 = 12 * 60, k0938 = 38 * 60, k1010 = 70 * 60;
  std::vector<json> tr;
  int warm_actions = 0;
  std::vector<std::string> failover_steps, failback_steps;
  for (const auto& j : lines) {
    if (j["event"] == "transition") tr.push_back(j);
    if (j["event"] == "action" && j["phase"] == "warm") ++warm_actions;
    if (j["event"] == "action" && j["phase"] == "failover") failover_steps.push_back(j["step"]);
    if (j["event"] == "action" && j["phase"] == "failback") failback_steps.push_back(j["step"]);
  }
  REQUIRE(tr.size() == 6);
  // Warm within one round of the first degraded point (09:12:00).
  CHECK(tr[0]["to"] == "primary_degraded");
  CHECK(tr[0]["t"].get<int>() >= k0912);
  CHECK(tr[0]["t"].get<int>() <= k0912 + 10);
  CHECK(warm_actions == 1);
  // No failover during the 26 minutes of flapping; exactly one, three rounds into the outage.
  CHECK(tr[1]["to"] == "failing_over");
  CHECK(tr[1]["t"] == k0938 + 20);
  CHECK(tr[1]["reason"] == "failing over: primary 0/6 for 3 rounds, secondary 6/6");
  CHECK(tr[2]["to"] == "secondary_active");
  CHECK(failover_steps == std::vector<std::string>{"promote-sql", "switch-dns"});
  // Exactly one failback, only after 45 minutes of a stable primary (stable from 10:10).
  CHECK(tr[3]["to"] == "failing_back");
  CHECK(tr[3]["t"] == k1010 + 45 * 60);
  CHECK(tr[3]["reason"] == "failing back: primary 6/6 stable for 45m");
  CHECK(failback_steps == std::vector<std::string>{"switch-dns", "demote-sql"});
  CHECK(tr[4]["to"] == "primary_degraded");
  CHECK(tr[5]["to"] == "primary_active");  // cooled 30 minutes later
  const json s = summary_of(lines, "shop");
  CHECK(s["failovers"] == 1);
  CHECK(s["failbacks"] == 1);
  CHECK(s["holds"] == 0);
  CHECK(s["first_warm_t"] == k0912);
  // Nine single-round dips below 50 % while flapping, and the 20 s of outage until the switch.
  CHECK(s["downtime_s"] == 9 * 10 + 20);
}

TEST_CASE("simulate: docs/simulate.md shows the example's real output") {
  const std::string root = FO_SOURCE_DIR;
  auto cfg = fo::config::load_config_file(root + "/etc/examples/simulate.toml");
  auto r = simulate(cfg, root + "/etc/examples/seed-004.csv", false);
  REQUIRE(r.rc == 0);
  REQUIRE(r.out.size() > 100);
  CHECK(read_file(root + "/docs/simulate.md").find(r.out) != std::string::npos);
}
