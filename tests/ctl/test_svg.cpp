// The timeline picture: the renderer's structure and escaping (checked with a real XML parser,
// xmllint), the bounded health series, `failoverctl timeline` on a store written by the real
// store code, and `failoverctl simulate --svg`.
#include <catch2/catch.hpp>
#include <limits>
#include <regex>

#include "ctl/svg.hpp"
#include "ctl/timeline.hpp"
#include "daemon/store/reader.hpp"
#include "daemon/store/store.hpp"
#include "tests/integration/harness.hpp"

using namespace fo::ctl;
using namespace fo::test;

namespace {

constexpr const char* kXmllint = "/usr/bin/xmllint";
// 2026-12-04T09:00:00Z
constexpr int64_t kNine = 1796374800000;
constexpr int64_t kMinute = 60000;

// Parses the file with xmllint (failing the test when it is not well-formed XML) and evaluates
// an XPath expression on it.
std::string xpath(const TempDir& dir, const std::string& file, const std::string& expr) {
  RunResult r = run({kXmllint, "--xpath", expr, file}, dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  if (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();  // after numbers
  return r.out;
}

std::string count(const TempDir& dir, const std::string& file, const std::string& element,
                  const std::string& cls) {
  return xpath(dir, file, "count(//*[local-name()='" + element + "'][@class='" + cls + "'])");
}

std::string attrs(const TempDir& dir, const std::string& file, const std::string& element,
                  const std::string& cls, const std::string& attr) {
  // string-join is XPath 2; concatenate by hand for xmllint's XPath 1.
  std::string out;
  for (int i = 1;; ++i) {
    RunResult r = run({kXmllint, "--xpath",
                       "string((//*[local-name()='" + element + "'][@class='" + cls + "'])[" +
                           std::to_string(i) + "]/@" + attr + ")",
                       file},
                      dir);
    while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
    if (r.exit_code != 0 || r.out.empty() || i > 100) return out;
    out += (out.empty() ? "" : " ") + r.out;
  }
}

void well_formed(const TempDir& dir, const std::string& file) {
  RunResult r = run({kXmllint, "--noout", file}, dir);
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.out.empty());
}

svg::HealthPoint round_at(int64_t ts, double primary, bool primary_known = true) {
  svg::HealthPoint p;
  p.ts_ms = p.last_ms = ts;
  p.primary = primary;
  p.primary_known = primary_known;
  p.secondary = 1.0;
  p.secondary_known = true;
  return p;
}

fo::store::RoundRecord store_round(int64_t ts, int p_healthy, bool p_known, int s_healthy) {
  fo::store::RoundRecord r;
  r.ts_ms = ts;
  r.group = "shop";
  r.state = "primary_active";
  r.p_healthy = p_healthy;
  r.p_reporting = p_known ? 6 : 1;
  r.p_configured = 6;
  r.p_known = p_known;
  r.s_healthy = s_healthy;
  r.s_reporting = 6;
  r.s_configured = 6;
  r.s_known = true;
  return r;
}

// Two hours of group "shop" from 09:00 UTC, one round every 10 s: the primary fails at 09:38 and
// comes back at 10:20, its health is unknown 09:20-09:22; five transitions.
void write_history(const std::string& db_path) {
  auto store = fo::store::Store::open(db_path);
  for (int64_t t = kNine; t < kNine + 120 * kMinute; t += 10000) {
    const bool unknown = t >= kNine + 20 * kMinute && t < kNine + 22 * kMinute;
    const bool down = t >= kNine + 38 * kMinute && t < kNine + 80 * kMinute;
    store->record_round(store_round(t, down ? 0 : 6, !unknown, 6));
  }
  auto transition = [&](int64_t ts, const char* from, const char* to, const char* active) {
    fo::store::TransitionRecord r;
    r.ts_ms = ts;
    r.group = "shop";
    r.from = from;
    r.to = to;
    r.reason = std::string("moving to ") + to + " <because> & \"so\"";
    r.initiator = "auto";
    r.active = active;
    store->record_transition(r);
  };
  transition(kNine + 12 * kMinute, "primary_active", "primary_degraded", "primary");
  transition(kNine + 38 * kMinute + 30000, "primary_degraded", "failing_over", "primary");
  transition(kNine + 38 * kMinute + 31000, "failing_over", "secondary_active", "secondary");
  transition(kNine + 90 * kMinute, "secondary_active", "failing_back", "secondary");
  transition(kNine + 90 * kMinute + 5000, "failing_back", "primary_degraded", "primary");
  REQUIRE(store->flush(std::chrono::seconds(10)));
}

}  // namespace

TEST_CASE("svg: xml_escape makes any text safe for XML") {
  CHECK(svg::xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&apos;");
  CHECK(svg::xml_escape("caf\xC3\xA9 \xE2\x86\x92 ok") == "caf\xC3\xA9 \xE2\x86\x92 ok");
  CHECK(svg::xml_escape(std::string("x\x01y\x1b", 4)) == "x\xEF\xBF\xBDy\xEF\xBF\xBD");
  CHECK(svg::xml_escape("bad \xFF byte \xC0\xAF") ==
        "bad \xEF\xBF\xBD byte \xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(svg::xml_escape("tab\tnewline\n") == "tab\tnewline\n");
  CHECK(svg::xml_escape("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
}

TEST_CASE("svg: the renderer draws markers, band segments, unknown stretches and UTC ticks") {
  TempDir dir;
  svg::Chart chart;
  chart.title = "timeline <of> \"shop\" & co";
  chart.start_ms = kNine;
  chart.end_ms = kNine + 60 * kMinute;
  svg::Panel p;
  p.group = "sh<op>&\x01\xFF";
  for (int64_t t = kNine; t < chart.end_ms; t += 10000) {
    const bool unknown = (t >= kNine + 10 * kMinute && t < kNine + 11 * kMinute) ||
                         (t >= kNine + 40 * kMinute && t < kNine + 41 * kMinute);
    p.health.push_back(round_at(t, t < kNine + 30 * kMinute ? 1.0 : 0.5, !unknown));
  }
  p.break_after_ms = 40000;
  p.served_at_start = "primary";
  p.transitions = {{kNine + 20 * kMinute, "primary_active", "failing_over", "why </title> <x>"},
                   {kNine + 21 * kMinute, "failing_over", "secondary_active", "done"},
                   {kNine + 50 * kMinute, "secondary_active", "held", "flapping"}};
  p.served = {{kNine + 21 * kMinute, "secondary"}, {kNine + 50 * kMinute, "secondary"}};
  p.dropped = {{kNine + 45 * kMinute, kNine + 46 * kMinute, 6}};
  chart.panels.push_back(p);
  const std::string file = dir / "t.svg";
  write_file(file, svg::render_timeline_svg(chart));

  well_formed(dir, file);
  CHECK(count(dir, file, "g", "panel") == "1");
  CHECK(count(dir, file, "g", "transition") == "3");
  CHECK(attrs(dir, file, "g", "transition", "data-to") == "failing_over secondary_active held");
  CHECK(count(dir, file, "rect", "served") == "2");  // same site twice is one segment
  CHECK(attrs(dir, file, "rect", "served", "data-site") == "primary secondary");
  CHECK(count(dir, file, "rect", "unknown") == "2");
  CHECK(count(dir, file, "rect", "dropped") == "1");
  CHECK(count(dir, file, "path", "health") == "2");
  // Ticks every 10 minutes, labelled in UTC; the date under the first one.
  CHECK(xpath(dir, file, "string((//*[@class='tick'])[1])") == "09:002026-12-04");
  CHECK(xpath(dir, file, "string((//*[@class='tick'])[4])") == "09:30");
  CHECK(count(dir, file, "text", "tick") == "7");
  CHECK(xpath(dir, file, "string(//*[@class='range'])") ==
        "2026-12-04 09:00:00 \xE2\x80\x93 2026-12-04 10:00:00 (times in UTC)");
  // Texts come back exactly as given (escaped on the way in, unescaped by the parser).
  CHECK(xpath(dir, file, "string(//*[local-name()='svg']/*[local-name()='text'][1])") ==
        chart.title);
  CHECK(xpath(dir, file, "string(//*[@class='panel']/@data-group)") ==
        "sh<op>&\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(xpath(dir, file, "string((//*[@class='transition'])[1]/*[local-name()='title'])") ==
        "2026-12-04 09:20:00 UTC: primary_active \xE2\x86\x92 failing_over\nwhy </title> <x>");
}

TEST_CASE("svg: a health line breaks where rounds are missing") {
  svg::Chart chart;
  chart.start_ms = 0;
  chart.end_ms = 100000;
  svg::Panel p;
  p.group = "g";
  for (int64_t t : {0, 10000, 20000, 70000, 80000}) p.health.push_back(round_at(t, 1.0));
  p.break_after_ms = 40000;
  chart.panels.push_back(p);
  const std::string doc = svg::render_timeline_svg(chart);
  const std::regex path_re("class=\"health\" data-site=\"primary\" d=\"([^\"]*)\"");
  std::smatch m;
  REQUIRE(std::regex_search(doc, m, path_re));
  const std::string broken = m[1].str();
  CHECK(std::count(broken.begin(), broken.end(), 'M') == 2);
  chart.panels[0].break_after_ms = 0;
  const std::string joined = svg::render_timeline_svg(chart);
  REQUIRE(std::regex_search(joined, m, path_re));
  const std::string whole = m[1].str();
  CHECK(std::count(whole.begin(), whole.end(), 'M') == 1);
}

TEST_CASE("svg: HealthReducer bounds the series and keeps the worst value of merged rounds") {
  svg::HealthReducer reducer(100);
  for (int64_t i = 0; i < 100000; ++i) {
    const bool dip = i == 54321;
    reducer.add(round_at(i * 10000, dip ? 0.25 : 1.0, i < 50000 || i >= 50010));
  }
  CHECK(reducer.rounds() == 100000);
  CHECK(reducer.break_after_ms() == 4 * 16384);  // median gap 10 s lies in [8192, 16384)
  auto points = reducer.take();
  CHECK(points.size() >= 100);
  CHECK(points.size() < 200);
  CHECK(points.front().ts_ms == 0);
  CHECK(points.back().last_ms == 99999 * 10000);
  double worst = 1.0;
  for (const auto& p : points) {
    CHECK(p.primary_known);  // ten unknown rounds among known ones merge into known points
    worst = std::min(worst, p.primary);
  }
  CHECK(worst == 0.25);
}

TEST_CASE("timeline: failoverctl timeline draws the store's history") {
  TempDir dir;
  const std::string db = dir / "state.db";
  write_history(db);
  const std::string file = dir / "shop.svg";
  RunResult r = run({FAILOVERCTL_PATH, "timeline", "shop", "--db", db, "--svg", file}, dir);
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  well_formed(dir, file);
  CHECK(count(dir, file, "g", "transition") == "5");
  CHECK(attrs(dir, file, "g", "transition", "data-to") ==
        "primary_degraded failing_over secondary_active failing_back primary_degraded");
  CHECK(attrs(dir, file, "rect", "served", "data-site") == "primary secondary primary");
  CHECK(count(dir, file, "rect", "unknown") == "1");
  CHECK(xpath(dir, file, "string((//*[@class='tick'])[1])") == "09:002026-12-04");
  CHECK(xpath(dir, file, "string((//*[@class='tick'])[2])") == "09:15");
  CHECK(xpath(dir, file, "string(//*[@class='panel']/@data-group)") == "shop");
  CHECK(xpath(dir, file, "string((//*[@class='transition'])[2]/*[local-name()='title'])") ==
        "2026-12-04 09:38:30 UTC: primary_degraded \xE2\x86\x92 failing_over\n"
        "moving to failing_over <because> & \"so\"");

  SECTION("--since/--until narrow the picture, the site serving at the start comes from before") {
    const std::string part = dir / "part.svg";
    r = run({FAILOVERCTL_PATH, "timeline", "shop", "--db", db, "--svg", part, "--since",
             "2026-12-04T09:30:00Z", "--until", "2026-12-04T10:00:00Z"},
            dir);
    INFO(r.out + r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(attrs(dir, part, "g", "transition", "data-to") == "failing_over secondary_active");
    CHECK(attrs(dir, part, "rect", "served", "data-site") == "primary secondary");
    CHECK(count(dir, part, "rect", "unknown") == "0");
    CHECK(xpath(dir, part, "string(//*[@class='range'])") ==
          "2026-12-04 09:30:00 \xE2\x80\x93 2026-12-04 10:00:00 (times in UTC)");
  }
  SECTION("an unknown group, a missing database and a bad time are errors") {
    r = run({FAILOVERCTL_PATH, "timeline", "nosuch", "--db", db, "--svg", dir / "x.svg"}, dir);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("no rounds and no transitions of group 'nosuch'") != std::string::npos);
    r = run({FAILOVERCTL_PATH, "timeline", "shop", "--db", dir / "none.db", "--svg", dir / "x.svg"},
            dir);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("none.db") != std::string::npos);
    r = run({FAILOVERCTL_PATH, "timeline", "shop", "--db", db, "--svg", dir / "x.svg", "--since",
             "yesterday"},
            dir);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("invalid --since 'yesterday'") != std::string::npos);
  }
}

TEST_CASE("timeline: reading rounds is capped and the picture says so") {
  TempDir dir;
  const std::string db = dir / "state.db";
  write_history(db);
  fo::store::Reader reader(db);
  TimelineLimits limits;
  limits.max_rounds = 100;
  limits.max_points = 20;
  svg::Chart chart =
      timeline_from_store(reader, "shop", 0, std::numeric_limits<int64_t>::max(), limits);
  REQUIRE(chart.panels.size() == 1);
  const svg::Panel& p = chart.panels[0];
  CHECK(p.health.size() < 40);
  CHECK(p.note.find("100 rounds") != std::string::npos);
  CHECK(p.note.find("stopped after 100 rounds") != std::string::npos);
  // 100 rounds of 10 s: the picture ends where the rounds stop, with the one transition in it.
  CHECK(chart.end_ms < kNine + 17 * kMinute);
  CHECK(p.transitions.size() == 1);
}

TEST_CASE("timeline: failoverctl simulate --svg draws the simulated incident") {
  TempDir dir;
  const std::string root = FO_SOURCE_DIR;
  const std::string file = dir / "sim.svg";
  RunResult r = run({FAILOVERCTL_PATH, "simulate", "--config", root + "/etc/examples/simulate.toml",
                     "--timeline", root + "/tests/sim/fixtures/seed-004.csv", "--svg", file},
                    dir);
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("failing_over -> secondary_active") != std::string::npos);  // still printed
  well_formed(dir, file);
  CHECK(attrs(dir, file, "g", "transition", "data-to") ==
        "primary_degraded failing_over secondary_active failing_back primary_degraded "
        "primary_active");
  CHECK(attrs(dir, file, "rect", "served", "data-site") == "primary secondary primary");
  CHECK(xpath(dir, file, "string((//*[@class='tick'])[2])") == "+0:30");
  CHECK(xpath(dir, file, "string(//*[@class='range'])") ==
        "+0:00:00 \xE2\x80\x93 +2:30:00 (time from the start of the timeline)");
}
