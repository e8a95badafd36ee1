// run_replay over a history written with fo::store::Store: the same decisions as simulate on
// the equivalent CSV, paging across rows that share a timestamp, windows, and input errors.
#include <catch2/catch.hpp>

#include <chrono>

#include "daemon/store/store.hpp"
#include "sim_test_util.hpp"

using namespace fo::sim;
using namespace fo::sim::test;
using nlohmann::json;

namespace {

constexpr int64_t kBase = 1764840000000;  // 2025-12-04 09:20:00 UTC
const char* const kLocs[] = {"ams", "fra", "nyc"};

// Verdict of location `loc` for a site in round k: 'h', 'u' or 'm'. The primary dies at round
// 4, one location misses now and then, the secondary is always healthy.
char verdict(const std::string& group, bool primary, int k, int loc) {
  if ((k * 7 + loc * 3 + int(group.size())) % 11 == 0) return 'm';
  if (!primary) return 'h';
  const int dies = group == "shop" ? 4 : 30;
  const int back = group == "shop" ? 60 : 32;  // api: two bad rounds, warm only
  return k >= dies && k < back ? 'u' : 'h';
}

// The same history twice: as store rounds and as a CSV timeline (a missing verdict has no row).
struct History {
  std::string csv = "t,group,site,location,ok\n";
  void add(fo::store::Store& db, const std::string& group, int k) {
    fo::store::RoundRecord r;
    r.ts_ms = kBase + int64_t(k) * 10000;
    r.group = group;
    r.state = "primary_active";
    for (int site = 0; site < 2; ++site) {
      std::string& text = site == 0 ? r.p_locations : r.s_locations;
      for (int l = 0; l < 3; ++l) {
        const char v = verdict(group, site == 0, k, l);
        text += std::string(l ? "," : "") + kLocs[l] + "=" + v;
        if (v != 'm')
          csv += std::to_string(k * 10) + "," + group + "," +
                 (site == 0 ? "primary," : "secondary,") + kLocs[l] + "," + (v == 'h' ? "1" : "0") +
                 "\n";
      }
    }
    db.record_round(r);
  }
};

RunResult replay(const fo::config::Config& cfg, const std::string& db, int64_t since, int64_t until,
                 bool json) {
  std::ostringstream out, err;
  SimOptions o;
  o.json = json;
  RunResult r;
  r.rc = run_replay(cfg, db, since, until, o, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

const std::string kTwoGroups = std::string(kSmallConfig) + R"(
[[group]]
name = "api"
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.11/" } ]
[group.secondary]
probes = [ { kind = "http", url = "https://198.51.100.21/" } ]
[group.policy]
failback_stable = "5m"
min_dwell = "1m"
)";

}  // namespace

TEST_CASE("replay: the recorded rounds give the same decisions as simulate on the same CSV") {
  TempDir dir;
  auto cfg = fo::config::parse_config(kTwoGroups, "two.toml");
  History h;
  {
    auto db = fo::store::Store::open(dir.file("h.db"));
    for (int k = 0; k < 200; ++k) {
      h.add(*db, "shop", k);
      h.add(*db, "api", k);
    }
    REQUIRE(db->flush(std::chrono::seconds(10)));
  }
  auto sim = simulate(cfg, dir.write("h.csv", h.csv), true);
  REQUIRE(sim.rc == 0);
  auto rep = replay(cfg, dir.file("h.db"), 0, kForever, true);
  REQUIRE(rep.rc == 0);
  CHECK(rep.err ==
        "replay: 400 round(s) recorded from 2025-12-04 09:20:00 to 2025-12-04 "
        "09:53:10 UTC\n");
  auto a = json_lines(sim.out);
  auto b = json_lines(rep.out);
  const auto raw_lines = lines_of(rep.out);
  REQUIRE(a.size() == b.size());
  int failovers = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(b[i].dump());
    if (b[i]["event"] != "summary") {
      // Replay adds the recorded epoch time, placed right after t.
      REQUIRE(b[i].contains("ts_ms"));
      CHECK(b[i]["ts_ms"].get<int64_t>() == kBase + int64_t(b[i]["t"].get<double>() * 1000));
      const std::string& raw = raw_lines[i];
      CHECK(raw.rfind("{\"t\":", 0) == 0);
      CHECK(raw.compare(raw.find(',') + 1, 8, "\"ts_ms\":") == 0);
      b[i].erase("ts_ms");
    }
    CHECK(a[i] == b[i]);
    if (b[i]["event"] == "transition" && b[i]["to"] == "failing_over") ++failovers;
  }
  // The scenario did something: shop failed over; api only warmed.
  CHECK(failovers == 1);
}

TEST_CASE("replay: pages through rows sharing a timestamp without losing or repeating one") {
  TempDir dir;
  const std::string cfg_text = kTwoGroups + R"(
[[group]]
name = "web"
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.12/" } ]
[group.secondary]
probes = [ { kind = "http", url = "https://198.51.100.22/" } ]
)";
  auto cfg = fo::config::parse_config(cfg_text, "three.toml");
  History h;
  {
    auto db = fo::store::Store::open(dir.file("h.db"));
    // 3 groups x 1500 rounds: the 4096-row pages end in the middle of a timestamp.
    for (int k = 0; k < 1500; ++k)
      for (const char* g : {"shop", "api", "web"}) h.add(*db, g, k);
    REQUIRE(db->flush(std::chrono::seconds(30)));
  }
  auto rep = replay(cfg, dir.file("h.db"), 0, kForever, true);
  REQUIRE(rep.rc == 0);
  CHECK(rep.err.find("replay: 4500 round(s) recorded") == 0);
  auto sim = simulate(cfg, dir.write("h.csv", h.csv), true);
  REQUIRE(sim.rc == 0);
  auto a = json_lines(sim.out);
  auto b = json_lines(rep.out);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    b[i].erase("ts_ms");
    CHECK(a[i] == b[i]);
  }
}

TEST_CASE("replay: since/until select a window and t counts from its first round") {
  TempDir dir;
  auto cfg = fo::config::parse_config(kSmallConfig, "small.toml");
  {
    auto db = fo::store::Store::open(dir.file("h.db"));
    History h;
    for (int k = 0; k < 100; ++k) h.add(*db, "shop", k);
    REQUIRE(db->flush(std::chrono::seconds(10)));
  }
  // From round 2 (the primary dies at round 4 = t 20 in the window) to round 50.
  auto rep = replay(cfg, dir.file("h.db"), kBase + 20000, kBase + 500000, true);
  REQUIRE(rep.rc == 0);
  CHECK(rep.err ==
        "replay: 48 round(s) recorded from 2025-12-04 09:20:20 to 2025-12-04 "
        "09:28:10 UTC\n");
  auto lines = json_lines(rep.out);
  REQUIRE(lines.size() >= 2);
  CHECK(lines[0]["event"] == "transition");
  CHECK(lines[0]["to"] == "primary_degraded");
  CHECK(lines[0]["t"] == 20);
  CHECK(lines[0]["ts_ms"] == kBase + 40000);
}

TEST_CASE("replay: the table form adds the UTC time of each event") {
  TempDir dir;
  auto cfg = fo::config::parse_config(kSmallConfig, "small.toml");
  {
    auto db = fo::store::Store::open(dir.file("h.db"));
    History h;
    for (int k = 0; k < 20; ++k) h.add(*db, "shop", k);
    REQUIRE(db->flush(std::chrono::seconds(10)));
  }
  auto rep = replay(cfg, dir.file("h.db"), 0, kForever, false);
  REQUIRE(rep.rc == 0);
  auto lines = lines_of(rep.out);
  REQUIRE(lines.size() > 2);
  CHECK(lines[0] == "time        when (UTC)           group  event       details");
  CHECK(lines[1].rfind("+00:00:40   2025-12-04 09:20:40  shop   transition  primary_active -> "
                       "primary_degraded: ",
                       0) == 0);
}

TEST_CASE("replay: groups and locations the config does not know are skipped with a warning") {
  TempDir dir;
  auto cfg = fo::config::parse_config(kSmallConfig, "small.toml");
  {
    auto db = fo::store::Store::open(dir.file("h.db"));
    History h;
    for (int k = 0; k < 10; ++k) {
      h.add(*db, "shop", k);
      h.add(*db, "gone", k);
    }
    fo::store::RoundRecord r;
    r.ts_ms = kBase + 100000;
    r.group = "shop";
    r.p_locations = "ams=h,lon=h,fra=x,nyc";
    db->record_round(r);
    REQUIRE(db->flush(std::chrono::seconds(10)));
  }
  auto rep = replay(cfg, dir.file("h.db"), 0, kForever, true);
  REQUIRE(rep.rc == 0);
  CHECK(rep.err.find("replay: warning: ignored 10 round(s) of groups not in the config (gone)\n") !=
        std::string::npos);
  CHECK(rep.err.find("replay: warning: ignored 1 verdict(s) from locations the config does not "
                     "list for their group\n") != std::string::npos);
  CHECK(rep.err.find("replay: warning: ignored 2 malformed location verdict(s)\n") !=
        std::string::npos);
}

TEST_CASE("replay: a missing database, an empty window or no rounds exit 1 and create nothing") {
  TempDir dir;
  auto cfg = fo::config::parse_config(kSmallConfig, "small.toml");
  auto r = replay(cfg, dir.file("missing.db"), 0, kForever, true);
  CHECK(r.rc == 1);
  CHECK(r.err == "replay: " + dir.file("missing.db") + ": No such file or directory\n");
  CHECK_FALSE(std::filesystem::exists(dir.file("missing.db")));

  r = replay(cfg, dir.file("."), 0, kForever, true);
  CHECK(r.rc == 1);
  CHECK(r.err == "replay: " + dir.file(".") + ": not a regular file\n");

  r = replay(cfg, dir.write("text.db", "this is not a database, just text that is long enough"), 0,
             kForever, true);
  CHECK(r.rc == 1);
  CHECK(r.err.find("not an SQLite database") != std::string::npos);

  { auto db = fo::store::Store::open(dir.file("empty.db")); }
  r = replay(cfg, dir.file("empty.db"), 0, kForever, true);
  CHECK(r.rc == 1);
  CHECK(r.err ==
        "replay: " + dir.file("empty.db") + ": no rounds recorded in the requested window\n");

  r = replay(cfg, dir.file("empty.db"), 500, 500, true);
  CHECK(r.rc == 1);
  CHECK(r.err == "replay: the window is empty: since (500) must be before until (500)\n");
  CHECK(r.out.empty());
}
