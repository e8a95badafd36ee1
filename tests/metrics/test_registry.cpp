// Registry and text exposition: exact output for each family kind, escaping, histogram buckets,
// value formatting, the per-family series cap and registration checks.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "daemon/metrics/registry.hpp"

using namespace fo::metrics;

TEST_CASE("sample values are formatted the way Prometheus parses them", "[metrics][format]") {
  CHECK(format_value(0) == "0");
  CHECK(format_value(1) == "1");
  CHECK(format_value(-3) == "-3");
  CHECK(format_value(1000000) == "1000000");
  CHECK(format_value(0.25) == "0.25");
  CHECK(format_value(0.1) == "0.1");
  CHECK(format_value(1e300) == "1e+300");
  CHECK(format_value(1.5e-7) == "1.5e-07");
  CHECK(format_value(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  // Shortest text that reads back as the same double.
  const double third = 1.0 / 3.0;
  CHECK(std::stod(format_value(third)) == third);
}

TEST_CASE("label values and help texts are escaped", "[metrics][format]") {
  CHECK(escape_label_value(R"(a\b"c)") == R"(a\\b\"c)");
  CHECK(escape_label_value("line1\nline2") == R"(line1\nline2)");
  CHECK(escape_label_value("plain-value_1.2") == "plain-value_1.2");
  CHECK(escape_help("back\\slash \"quoted\"\nnext") == "back\\\\slash \"quoted\"\\nnext");

  Registry r;
  auto& g = r.gauge("test_gauge", "A gauge.\nSecond line with \\.", {"name"});
  g.set({"we\"ird\\value\n"}, 2);
  CHECK(r.render() ==
        "# HELP test_gauge A gauge.\\nSecond line with \\\\.\n"
        "# TYPE test_gauge gauge\n"
        "test_gauge{name=\"we\\\"ird\\\\value\\n\"} 2\n"
        "# HELP failoverd_metrics_series_dropped_total New series refused because their family "
        "already had the maximum number of series.\n"
        "# TYPE failoverd_metrics_series_dropped_total counter\n"
        "failoverd_metrics_series_dropped_total{family=\"test_gauge\"} 0\n");
}

TEST_CASE("counters and gauges render HELP, TYPE and sorted series", "[metrics][format]") {
  Registry r;
  auto& c = r.counter("jobs_total", "Jobs done.", {"kind", "result"});
  auto& g = r.gauge("queue_depth", "Queued jobs.", {});
  auto& empty = r.gauge("never_set", "Nothing here.", {"x"});
  c.inc({"b", "ok"});
  c.inc({"a", "fail"}, 2.5);
  c.inc({"b", "ok"});
  c.inc({"b", "ok"}, -4);  // ignored: counters only go up
  c.inc({"b", "ok"}, std::numeric_limits<double>::quiet_NaN());
  c.inc({"too", "many", "labels"});  // wrong arity: ignored
  g.set({}, 7);
  g.add({}, -2);
  CHECK(c.value({"b", "ok"}) == 2);
  CHECK(c.value({"a", "fail"}) == 2.5);
  CHECK(c.size() == 2);
  CHECK(empty.size() == 0);
  const std::string text = r.render();
  CHECK(text.find("# HELP jobs_total Jobs done.\n"
                  "# TYPE jobs_total counter\n"
                  "jobs_total{kind=\"a\",result=\"fail\"} 2.5\n"
                  "jobs_total{kind=\"b\",result=\"ok\"} 2\n"
                  "# HELP queue_depth Queued jobs.\n"
                  "# TYPE queue_depth gauge\n"
                  "queue_depth 5\n") != std::string::npos);
  // A family without series is not exported at all.
  CHECK(text.find("never_set") == text.find("never_set\"} 0"));  // only in the drop counter
  CHECK(text.find("# TYPE never_set") == std::string::npos);
  CHECK(text.back() == '\n');

  CHECK(g.remove({}));
  CHECK_FALSE(g.remove({}));
  CHECK(r.render().find("queue_depth") == r.render().find("queue_depth\"} 0"));
}

TEST_CASE("histograms: cumulative buckets, le=\"+Inf\", _sum and _count", "[metrics][format]") {
  Registry r;
  auto& h = r.histogram("req_duration_seconds", "Request time.", {"path"}, {0.1, 0.5, 1});
  for (double v : {0.05, 0.1, 0.3, 0.3, 0.7, 2.0}) h.observe({"/x"}, v);
  h.observe({"/x"}, std::numeric_limits<double>::quiet_NaN());  // ignored
  auto snap = h.snapshot({"/x"});
  REQUIRE(snap);
  // 0.1 lands in le="0.1": buckets are "less than or equal".
  CHECK(snap->cumulative == std::vector<uint64_t>{2, 4, 5, 6});
  CHECK(snap->count == 6);
  CHECK(snap->sum == Approx(3.45));
  const std::string text = r.render();
  CHECK(text.find("# HELP req_duration_seconds Request time.\n"
                  "# TYPE req_duration_seconds histogram\n"
                  "req_duration_seconds_bucket{path=\"/x\",le=\"0.1\"} 2\n"
                  "req_duration_seconds_bucket{path=\"/x\",le=\"0.5\"} 4\n"
                  "req_duration_seconds_bucket{path=\"/x\",le=\"1\"} 5\n"
                  "req_duration_seconds_bucket{path=\"/x\",le=\"+Inf\"} 6\n"
                  "req_duration_seconds_sum{path=\"/x\"} 3.45\n"
                  "req_duration_seconds_count{path=\"/x\"} 6\n") != std::string::npos);

  Registry plain;
  auto& unlabelled = plain.histogram("wait_seconds", "Wait.", {}, {1});
  unlabelled.observe({}, 3);
  CHECK(plain.render().find("wait_seconds_bucket{le=\"1\"} 0\n"
                            "wait_seconds_bucket{le=\"+Inf\"} 1\n"
                            "wait_seconds_sum 3\n"
                            "wait_seconds_count 1\n") != std::string::npos);
}

TEST_CASE("each family holds at most the configured number of series", "[metrics][limits]") {
  Registry r(3);
  auto& c = r.counter("hits_total", "Hits.", {"id"});
  auto& g = r.gauge("level", "Level.", {"id"});
  auto& h = r.histogram("size_bytes", "Size.", {"id"}, {10, 100});
  for (int i = 0; i < 5; ++i) {
    c.inc({std::to_string(i)});
    g.set({std::to_string(i)}, i);
    h.observe({std::to_string(i)}, i);
  }
  CHECK(c.size() == 3);
  CHECK(g.size() == 3);
  CHECK(h.size() == 3);
  CHECK(r.dropped("hits_total") == 2);
  CHECK(r.dropped("level") == 2);
  CHECK(r.dropped("size_bytes") == 2);
  // Existing series keep working at the cap; only new ones are refused.
  c.inc({"0"}, 10);
  CHECK(c.value({"0"}) == 11);
  CHECK(r.dropped("hits_total") == 2);
  CHECK_FALSE(c.value({"4"}));
  const std::string text = r.render();
  CHECK(text.find("failoverd_metrics_series_dropped_total{family=\"hits_total\"} 2\n") !=
        std::string::npos);
  CHECK(text.find("hits_total{id=\"4\"}") == std::string::npos);
  // The drop counter itself is never capped, even with more families than the cap.
  CHECK(r.dropped("level") == 2);
  CHECK(text.find("failoverd_metrics_series_dropped_total{family=\"size_bytes\"} 2\n") !=
        std::string::npos);
  // Removing series frees room again.
  CHECK(g.remove_matching("id", "1") == 1);
  g.set({"9"}, 9);
  CHECK(g.value({"9"}) == 9);
}

TEST_CASE("label values are made valid UTF-8 and bounded", "[metrics][limits]") {
  Registry r;
  auto& g = r.gauge("g", "G.", {"v"});
  g.set({"caf\xc3\xa9"}, 1);  // valid UTF-8 stays
  g.set({"bad\xff\xfe"
         "byte"},
        2);  // invalid bytes become U+FFFD
  g.set({std::string(1000, 'x')}, 3);
  g.set({"bad\xff\xfe"
         "byte"},
        4);  // the same sanitized series, not a new one
  CHECK(g.size() == 3);
  CHECK(g.value({"caf\xc3\xa9"}) == 1);
  CHECK(g.value({"bad\xef\xbf\xbd\xef\xbf\xbd"
                 "byte"}) == 4);
  CHECK(g.value({std::string(kMaxLabelValueBytes, 'x')}) == 3);
  // Cutting never splits a multi-byte character.
  g.set({std::string(kMaxLabelValueBytes - 1, 'y') + "\xc3\xa9"}, 5);
  CHECK(g.value({std::string(kMaxLabelValueBytes - 1, 'y')}) == 5);
}

TEST_CASE("series of one label value can be removed across a family", "[metrics]") {
  Registry r;
  auto& c = r.counter("x_total", "X.", {"group", "site"});
  c.inc({"shop", "primary"});
  c.inc({"shop", "secondary"});
  c.inc({"blog", "primary"});
  CHECK(c.remove_matching("group", "shop") == 2);
  CHECK(c.remove_matching("nolabel", "shop") == 0);
  CHECK(c.size() == 1);
  CHECK(c.value({"blog", "primary"}) == 1);
}

TEST_CASE("registration rejects names that break Prometheus conventions", "[metrics]") {
  Registry r;
  r.gauge("ok_name", "Fine.", {"a"});
  CHECK_THROWS_AS(r.gauge("ok_name", "Twice.", {}), std::invalid_argument);
  CHECK_THROWS_AS(r.gauge("1starts_with_digit", "x", {}), std::invalid_argument);
  CHECK_THROWS_AS(r.gauge("has-dash", "x", {}), std::invalid_argument);
  CHECK_THROWS_AS(r.counter("events", "no _total suffix", {}), std::invalid_argument);
  CHECK_THROWS_AS(r.gauge("g1", "x", {"__reserved"}), std::invalid_argument);
  CHECK_THROWS_AS(r.gauge("g2", "x", {"a", "a"}), std::invalid_argument);
  CHECK_THROWS_AS(r.gauge("g3", "x", {"bad-label"}), std::invalid_argument);
  CHECK_THROWS_AS(r.histogram("h1_seconds", "x", {"le"}, {1}), std::invalid_argument);
  CHECK_THROWS_AS(r.histogram("h2_seconds", "x", {}, {}), std::invalid_argument);
  CHECK_THROWS_AS(r.histogram("h3_seconds", "x", {}, {1, 1}), std::invalid_argument);
  CHECK_THROWS_AS(r.histogram("h4_seconds", "x", {}, {2, 1}), std::invalid_argument);
  CHECK_THROWS_AS(r.histogram("h5_seconds", "x", {}, {1, std::numeric_limits<double>::infinity()}),
                  std::invalid_argument);
  CHECK_NOTHROW(r.counter("events_total", "Fine.", {"kind"}));
}
