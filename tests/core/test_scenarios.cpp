// Whole incidents in simulated time: hours of probe results run through the real engine in
// milliseconds. Each scenario asserts the transitions, the actions and the summary figures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include "daemon/core/simulator.hpp"

using namespace fo::core;
using namespace std::chrono_literals;

namespace {

Instant M(double minutes) {
  return Instant(Millis(int64_t(minutes * 60000)));
}

const std::vector<std::string> kSix = {"ams", "fra", "lon", "nyc", "sfo", "sin"};

// Probe results at a fixed cadence from every location; ok(t_minutes, location_index).
struct Timeline {
  struct Row {
    Instant t;
    std::string group;
    Site site;
    std::string location;
    bool ok;
  };
  std::vector<Row> rows;
  void add(const std::string& group, Site site, double from_min, double to_min,
           const std::vector<std::string>& locs, std::function<bool(double, int)> ok,
           double every_s = 10) {
    for (double t = from_min * 60; t < to_min * 60; t += every_s)
      for (int i = 0; i < int(locs.size()); ++i)
        rows.push_back({Instant(Millis(int64_t(t * 1000))), group, site, locs[i], ok(t / 60, i)});
  }
  size_t fed = 0;
  // Feeds the rows up to `until` (all of them by default); call again to continue.
  void feed(Simulator& sim, Instant until = Instant::max()) {
    if (fed == 0)
      std::stable_sort(rows.begin(), rows.end(),
                       [](const Row& a, const Row& b) { return a.t < b.t; });
    for (; fed < rows.size() && rows[fed].t <= until; ++fed) {
      const Row& r = rows[fed];
      sim.observe(r.group, {r.t, r.site, r.location, "", r.ok});
    }
  }
};

SimGroup group(const std::string& name, const std::vector<std::string>& locs = kSix) {
  SimGroup g;
  g.name = name;
  g.locations = locs;
  g.policy.min_locations = int(locs.size()) / 2 + 1;
  g.policy.interval = 10s;
  g.policy.degraded_interval = 10s;
  g.policy.stale_after = 20s;
  g.step_names[int(Phase::failover)] = {"promote-sql", "switch-dns"};
  return g;
}

std::vector<SimEvent> of(const Simulator& sim, SimEvent::Kind k, const std::string& group = "") {
  std::vector<SimEvent> out;
  for (const auto& e : sim.events())
    if (e.kind == k && (group.empty() || e.group == group)) out.push_back(e);
  return out;
}

std::vector<State> path(const Simulator& sim, const std::string& group = "") {
  std::vector<State> out;
  for (const auto& e : of(sim, SimEvent::Kind::transition, group)) out.push_back(e.to);
  return out;
}

SimSummary summary(const Simulator& sim, const std::string& group) {
  for (const auto& s : sim.summaries())
    if (s.group == group) return s;
  FAIL("no summary for " << group);
  return {};
}

auto always(bool v) {
  return [v](double, int) { return v; };
}

}  // namespace

// Seed 004: the primary degraded on and off for 26 minutes before it went down completely,
// and SQL failed back on a single good sample. failoverd warms at the first bad round, fails
// over once, and fails back once, only after 45 minutes of a continuously healthy primary.
TEST_CASE("seed incident 004: warm early, one failover, one dampened failback") {
  Simulator sim({group("shop")}, M(0));
  Timeline tl;
  tl.add("shop", Site::primary, 0, 200, kSix, [](double m, int loc) {
    if (m < 12) return true;
    if (m < 38) return int(m) % 5 == 0 || (int(m) + loc) % 3 != 0;  // flapping, 4/6 typical
    if (m < 56) return false;                                       // complete outage
    if (m < 70) return (int(m * 6) + loc) % 4 != 0;                 // coming back, flaky
    return true;
  });
  // The secondary is cold until warmed; it takes three minutes to start.
  tl.add("shop", Site::secondary, 0, 200, kSix, [](double m, int) { return m >= 15.5; });
  tl.feed(sim);
  sim.run_until(M(200));

  auto s = summary(sim, "shop");
  REQUIRE(s.first_warm);
  // The first degraded sample is at 12:00; the round at 12:10 sees it.
  CHECK(*s.first_warm <= M(12) + 10s);
  CHECK(s.failovers == 1);
  CHECK(s.failbacks == 1);
  CHECK(s.holds == 0);
  CHECK(path(sim) == std::vector<State>{State::primary_degraded, State::failing_over,
                                        State::secondary_active, State::failing_back,
                                        State::primary_degraded, State::primary_active});
  auto tr = of(sim, SimEvent::Kind::transition);
  // Failover 3 rounds after the complete outage began at 38:00.
  CHECK(tr[1].t > M(38));
  CHECK(tr[1].t <= M(38) + 40s);
  CHECK(tr[1].reason == "failing over: primary 0/6 for 3 rounds, secondary 6/6");
  // Failback no sooner than 45 minutes after the primary became continuously healthy (70:00).
  CHECK(tr[3].t >= M(70 + 45));
  CHECK(tr[3].t <= M(70 + 45) + 20s);
  // Cool 30 minutes after failback.
  CHECK(tr[5].t >= tr[4].t + 30min);
  // Each failover action step is reported once, in order.
  std::vector<std::string> steps;
  for (const auto& a : of(sim, SimEvent::Kind::action))
    if (a.phase == Phase::failover) steps.push_back(a.step);
  CHECK(steps == std::vector<std::string>{"promote-sql", "switch-dns"});
  // Downtime is the outage until the switch, not the 18 minutes of the outage.
  CHECK(s.downtime <= 60s);
  CHECK(s.downtime >= 20s);
}

TEST_CASE("a primary that flaps for hours trips the flap guard and holds") {
  SimGroup g = group("shop");
  g.policy.failback_stable = 5min;
  g.policy.min_dwell = 1min;
  g.policy.flap_limit = 3;
  g.policy.flap_window = 1h;
  Simulator sim({g}, M(0));
  Timeline tl;
  // Down 2 minutes out of every 8, for 6 hours.
  tl.add("shop", Site::primary, 0, 360, kSix, [](double m, int) { return std::fmod(m, 8) >= 2; });
  tl.add("shop", Site::secondary, 0, 360, kSix, always(true));
  tl.feed(sim);
  sim.run_until(M(360));
  auto s = summary(sim, "shop");
  CHECK(s.holds == 1);
  CHECK(sim.state("shop").state == State::held);
  CHECK(s.failovers + s.failbacks == 3);
  // Never more than flap_limit automatic switches within any flap_window.
  auto tr = of(sim, SimEvent::Kind::transition);
  std::vector<Instant> switches;
  for (const auto& e : tr)
    if (e.to == State::failing_over || e.to == State::failing_back) switches.push_back(e.t);
  for (size_t i = 0; i + 3 < switches.size(); ++i) CHECK(switches[i + 3] - switches[i] >= 1h);
  CHECK(tr.back().reason.find("flap guard") != std::string::npos);
}

TEST_CASE("one location partitioned from the primary warms but never fails over") {
  const std::vector<std::string> locs = {"ams", "fra", "nyc"};
  Simulator sim({group("shop", locs)}, M(0));
  Timeline tl;
  tl.add("shop", Site::primary, 0, 120, locs,
         [](double m, int loc) { return !(loc == 0 && m >= 10); });
  tl.add("shop", Site::secondary, 0, 120, locs, always(true));
  tl.feed(sim);
  sim.run_until(M(120));
  CHECK(path(sim) == std::vector<State>{State::primary_degraded});
  auto s = summary(sim, "shop");
  CHECK(s.failovers == 0);
  CHECK(*s.first_warm <= M(10) + 10s);
}

TEST_CASE("thirty minutes without any results is not an outage") {
  Simulator sim({group("shop")}, M(0));
  Timeline tl;
  tl.add("shop", Site::primary, 0, 10, kSix, always(true));
  tl.add("shop", Site::secondary, 0, 10, kSix, always(true));
  tl.add("shop", Site::primary, 40, 60, kSix, always(true));
  tl.add("shop", Site::secondary, 40, 60, kSix, always(true));
  sim.record_rounds = true;
  tl.feed(sim);
  sim.run_until(M(60));
  CHECK(path(sim).empty());
  auto rounds = of(sim, SimEvent::Kind::round);
  bool saw_unknown = false;
  for (const auto& r : rounds)
    if (r.t > M(11) && r.t < M(40)) {
      CHECK_FALSE(r.primary.known);
      saw_unknown = saw_unknown ||
                    r.reason.find("no automatic transition on missing data") != std::string::npos;
    }
  CHECK(saw_unknown);
}

TEST_CASE("both sites down: no failover, alerts") {
  Simulator sim({group("shop")}, M(0));
  Timeline tl;
  tl.add("shop", Site::primary, 0, 60, kSix, [](double m, int) { return m < 5; });
  tl.add("shop", Site::secondary, 0, 60, kSix, always(false));
  tl.feed(sim);
  sim.run_until(M(60));
  CHECK(path(sim) == std::vector<State>{State::primary_degraded});
  auto s = summary(sim, "shop");
  CHECK(s.failovers == 0);
  CHECK(s.alerts > 0);
  CHECK(s.downtime >= 54min);
}

TEST_CASE("manual failback waits for the operator") {
  SimGroup g = group("shop");
  g.policy.failback = FailbackMode::manual;
  Simulator sim({g}, M(0));
  Timeline tl;
  tl.add("shop", Site::primary, 0, 600, kSix, [](double m, int) { return m < 5 || m >= 20; });
  tl.add("shop", Site::secondary, 0, 600, kSix, always(true));
  tl.feed(sim, M(500));
  sim.run_until(M(500));
  CHECK(sim.state("shop").state == State::secondary_active);
  sim.schedule({M(500) + 5s, "shop", Command::failback, false, "primary checked by hand"});
  tl.feed(sim);
  sim.run_until(M(600));
  auto s = summary(sim, "shop");
  CHECK(s.failovers == 1);
  CHECK(s.failbacks == 1);
  auto tr = of(sim, SimEvent::Kind::transition);
  CHECK(tr[3].to == State::failing_back);
  CHECK(tr[3].initiator == Initiator::operator_);
}

TEST_CASE("two groups fail independently") {
  Simulator sim({group("shop"), group("api")}, M(0));
  Timeline tl;
  tl.add("shop", Site::primary, 0, 60, kSix, [](double m, int) { return m < 10; });
  tl.add("shop", Site::secondary, 0, 60, kSix, always(true));
  tl.add("api", Site::primary, 0, 60, kSix, always(true));
  tl.add("api", Site::secondary, 0, 60, kSix, always(true));
  tl.feed(sim);
  sim.run_until(M(60));
  CHECK(summary(sim, "shop").failovers == 1);
  CHECK(summary(sim, "api").failovers == 0);
  CHECK(path(sim, "api").empty());
  CHECK(sim.state("api").state == State::primary_active);
}

TEST_CASE("an operator hold during an outage stops automation until release") {
  Simulator sim({group("shop")}, M(0));
  Timeline tl;
  tl.add("shop", Site::primary, 0, 60, kSix, [](double m, int) { return m < 10; });
  tl.add("shop", Site::secondary, 0, 60, kSix, always(true));
  sim.schedule({M(10) + 15s, "shop", Command::hold, false, "investigating"});
  sim.schedule({M(30), "shop", Command::release, false, ""});
  tl.feed(sim);
  sim.run_until(M(60));
  auto tr = of(sim, SimEvent::Kind::transition);
  REQUIRE(tr.size() >= 4);
  CHECK(tr[1].to == State::held);
  // Nothing automatic happens while held, even though the primary is down the whole time.
  for (const auto& e : tr)
    if (e.t > M(10) + 15s && e.t < M(30)) CHECK(e.initiator == Initiator::operator_);
  CHECK(tr[2].to == State::primary_degraded);
  CHECK(tr[2].t == M(30));
  // After release, failover_after rounds are counted again from scratch.
  CHECK(tr[3].to == State::failing_over);
  CHECK(tr[3].t == M(30) + 20s);
  CHECK(summary(sim, "shop").failovers == 1);
}

TEST_CASE("a restart in the middle of a failover resumes the plan once") {
  SimGroup g = group("shop");
  g.plan_duration = 2min;
  Timeline tl;
  tl.add("shop", Site::primary, 0, 120, kSix, [](double m, int) { return m < 10; });
  tl.add("shop", Site::secondary, 0, 120, kSix, always(true));

  Simulator first({g}, M(0));
  Timeline a = tl;
  a.rows.erase(
      std::remove_if(a.rows.begin(), a.rows.end(), [](const auto& r) { return r.t > M(11); }),
      a.rows.end());
  a.feed(first);
  first.run_until(M(11));
  REQUIRE(first.state("shop").state == State::failing_over);
  const std::string saved = serialize(first.state("shop"));

  // The daemon dies; a new one starts from the stored state a minute later.
  Simulator second({g}, M(12));
  auto restored = deserialize(saved);
  REQUIRE(restored);
  second.restore("shop", *restored);
  Timeline b = tl;
  b.rows.erase(
      std::remove_if(b.rows.begin(), b.rows.end(), [](const auto& r) { return r.t < M(12); }),
      b.rows.end());
  b.feed(second);
  second.run_until(M(120));
  auto s = summary(second, "shop");
  CHECK(s.failovers == 1);
  CHECK_FALSE(s.first_warm);  // warm already ran before the restart: not repeated
  CHECK(second.state("shop").state == State::secondary_active);
  CHECK(path(second) == std::vector<State>{State::secondary_active});
}

TEST_CASE("a failing failover plan holds the group") {
  SimGroup g = group("shop");
  g.plans_fail = true;
  Simulator sim({g}, M(0));
  Timeline tl;
  tl.add("shop", Site::primary, 0, 60, kSix, [](double m, int) { return m < 10; });
  tl.add("shop", Site::secondary, 0, 60, kSix, always(true));
  tl.feed(sim);
  sim.run_until(M(60));
  CHECK(path(sim) == std::vector<State>{State::primary_degraded, State::failing_over, State::held});
  CHECK(sim.state("shop").active == Site::primary);
}
