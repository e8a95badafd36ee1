// Location verdicts and site health: three-valued, freshness-aware, quorum-aware.
#include <catch2/catch.hpp>

#include "daemon/core/health.hpp"

using namespace fo::core;
using namespace std::chrono_literals;

namespace {
Instant at(int s) {
  return Instant(Millis(int64_t(s) * 1000));
}
Policy policy(Require r = Require::all, int min_locations = 2) {
  Policy p;
  p.interval = 10s;
  p.stale_after = 20s;
  p.require = r;
  p.min_locations = min_locations;
  return p;
}
}  // namespace

TEST_CASE("health is the share of reporting locations that see the site healthy") {
  HealthBoard b({"a", "b", "c"}, {"http#0"}, {"http#0"});
  b.record({at(1), Site::primary, "a", "http#0", true});
  b.record({at(1), Site::primary, "b", "http#0", false});
  b.record({at(1), Site::primary, "c", "http#0", true});
  auto h = b.health(Site::primary, at(5), policy());
  CHECK(h.healthy == 2);
  CHECK(h.reporting == 3);
  CHECK(h.configured == 3);
  CHECK(h.known);
  CHECK(h.fraction() == "2/3");
  CHECK(h.locations[1].verdict == Verdict::unhealthy);
  auto s = b.health(Site::secondary, at(5), policy());
  CHECK_FALSE(s.known);
  CHECK(s.reporting == 0);
  CHECK(s.fraction() == "unknown (0/3 reporting)");
}

TEST_CASE("stale results stop counting, missing data is not down") {
  HealthBoard b({"a", "b", "c"}, {"p"}, {"p"});
  b.record({at(0), Site::primary, "a", "p", false});
  b.record({at(15), Site::primary, "b", "p", true});
  b.record({at(15), Site::primary, "c", "p", true});
  auto h = b.health(Site::primary, at(25), policy());  // a is 25 s old > stale_after 20 s
  CHECK(h.reporting == 2);
  CHECK(h.healthy == 2);
  CHECK(h.ratio() == 1.0);
  CHECK(h.locations[0].verdict == Verdict::missing);
  CHECK(h.locations[0].last_result == at(0));
  auto later = b.health(Site::primary, at(40), policy());
  CHECK_FALSE(later.known);
}

TEST_CASE("older results never overwrite newer ones") {
  HealthBoard b({"a"}, {"p"}, {"p"});
  b.record({at(10), Site::primary, "a", "p", true});
  b.record({at(5), Site::primary, "a", "p", false});
  CHECK(b.health(Site::primary, at(11), policy(Require::all, 1)).healthy == 1);
}

TEST_CASE("require all: one failing probe makes the location unhealthy, a silent one missing") {
  HealthBoard b({"a", "b"}, {"http", "tcp"}, {"x"});
  b.record({at(1), Site::primary, "a", "http", true});
  b.record({at(1), Site::primary, "a", "tcp", false});
  b.record({at(1), Site::primary, "b", "http", true});  // tcp missing
  auto h = b.health(Site::primary, at(2), policy(Require::all, 1));
  CHECK(h.locations[0].verdict == Verdict::unhealthy);
  CHECK(h.locations[1].verdict == Verdict::missing);
  CHECK(h.reporting == 1);
  CHECK(h.healthy == 0);
}

TEST_CASE("require any: one passing probe is enough, all failing is unhealthy") {
  HealthBoard b({"a", "b", "c"}, {"http", "tcp"}, {"x"});
  b.record({at(1), Site::primary, "a", "http", true});
  b.record({at(1), Site::primary, "a", "tcp", false});
  b.record({at(1), Site::primary, "b", "http", false});
  b.record({at(1), Site::primary, "b", "tcp", false});
  b.record({at(1), Site::primary, "c", "http", false});  // tcp missing: unknown
  auto h = b.health(Site::primary, at(2), policy(Require::any, 1));
  CHECK(h.locations[0].verdict == Verdict::healthy);
  CHECK(h.locations[1].verdict == Verdict::unhealthy);
  CHECK(h.locations[2].verdict == Verdict::missing);
}

TEST_CASE("fewer reporting locations than min_locations is unknown") {
  HealthBoard b({"a", "b", "c", "d", "e"}, {"p"}, {"p"});
  b.record({at(1), Site::primary, "a", "p", false});
  b.record({at(1), Site::primary, "b", "p", false});
  CHECK_FALSE(b.health(Site::primary, at(2), policy(Require::all, 3)).known);
  b.record({at(1), Site::primary, "c", "p", false});
  CHECK(b.health(Site::primary, at(2), policy(Require::all, 3)).known);
}

TEST_CASE("results from unconfigured locations or probes are ignored") {
  HealthBoard b({"a"}, {"p"}, {"p"});
  b.record({at(1), Site::primary, "zz", "p", false});
  b.record({at(1), Site::primary, "a", "other", false});
  CHECK(b.health(Site::primary, at(2), policy(Require::all, 1)).reporting == 0);
}
