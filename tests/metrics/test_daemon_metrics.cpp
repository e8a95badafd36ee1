// DaemonMetrics facade: one-hot state and verdict gauges, site health, probe and step
// observations, store mirrors, forgetting a group, and the documented family list.
#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "daemon/metrics/daemon_metrics.hpp"

using namespace fo;
using fo::metrics::DaemonMetrics;

namespace {

const core::Instant kStart = core::instant_from_ms(1700000000500);

// The value of one exported series, read back from the rendered text; NaN-safe.
std::optional<std::string> sample(const std::string& text, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const auto at = text.find(key);
  if (at == std::string::npos) return std::nullopt;
  const auto start = at + key.size();
  return text.substr(start, text.find('\n', start) - start);
}

}  // namespace

TEST_CASE("group state is one-hot over all six states", "[metrics][daemon]") {
  DaemonMetrics m("1.2.3", kStart);
  m.set_group_state("shop", core::State::primary_active);
  m.set_group_state("shop", core::State::failing_over);
  const std::string text = m.render();
  const char* states[] = {"primary_active",   "primary_degraded", "failing_over",
                          "secondary_active", "failing_back",     "held"};
  for (const char* s : states) {
    CAPTURE(s);
    CHECK(sample(text, std::string("failoverd_group_state{group=\"shop\",state=\"") + s + "\"}") ==
          (std::string(s) == "failing_over" ? "1" : "0"));
  }
  // Exactly six series for the group, whatever the history of states.
  CHECK(m.registry().dropped("failoverd_group_state") == 0);
  std::size_t lines = 0;
  for (std::size_t p = 0;
       (p = text.find("failoverd_group_state{group=\"shop\"", p)) != std::string::npos; ++p)
    ++lines;
  CHECK(lines == 6);
}

TEST_CASE("active site, site health and location verdicts", "[metrics][daemon]") {
  DaemonMetrics m("1.2.3", kStart);
  m.set_active("shop", core::Site::secondary);
  core::SiteHealth h;
  h.healthy = 1;
  h.reporting = 4;
  h.configured = 5;
  h.known = true;
  h.locations = {{"ams", core::Verdict::healthy, {}},
                 {"fra", core::Verdict::unhealthy, {}},
                 {"nyc", core::Verdict::missing, {}}};
  m.set_site_health("shop", core::Site::primary, h);
  h.known = false;
  h.locations.clear();
  m.set_site_health("shop", core::Site::secondary, h);
  const std::string text = m.render();
  CHECK(sample(text, R"(failoverd_group_active_site{group="shop",site="primary"})") == "0");
  CHECK(sample(text, R"(failoverd_group_active_site{group="shop",site="secondary"})") == "1");
  CHECK(sample(text, R"(failoverd_site_health_ratio{group="shop",site="primary"})") == "0.25");
  CHECK(sample(text, R"(failoverd_site_health_ratio{group="shop",site="secondary"})") == "NaN");
  CHECK(sample(text, R"(failoverd_site_healthy_locations{group="shop",site="primary"})") == "1");
  CHECK(sample(text, R"(failoverd_site_reporting_locations{group="shop",site="primary"})") == "4");
  const std::string v = R"(failoverd_location_verdict{group="shop",site="primary",location=)";
  CHECK(sample(text, v + R"("ams",verdict="healthy"})") == "1");
  CHECK(sample(text, v + R"("ams",verdict="unhealthy"})") == "0");
  CHECK(sample(text, v + R"("ams",verdict="missing"})") == "0");
  CHECK(sample(text, v + R"("fra",verdict="unhealthy"})") == "1");
  CHECK(sample(text, v + R"("nyc",verdict="missing"})") == "1");
  CHECK(sample(text, v + R"("nyc",verdict="healthy"})") == "0");

  m.set_location_verdict("shop", core::Site::primary, "nyc", core::Verdict::healthy);
  const std::string after = m.render();
  CHECK(sample(after, v + R"("nyc",verdict="missing"})") == "0");
  CHECK(sample(after, v + R"("nyc",verdict="healthy"})") == "1");
}

TEST_CASE("probe, round, transition, step, plan and drift counters", "[metrics][daemon]") {
  DaemonMetrics m("1.2.3", kStart);
  m.observe_probe("shop", core::Site::primary, "ams", "front", true, 0.004);
  m.observe_probe("shop", core::Site::primary, "ams", "front", false, 5.0);
  m.observe_probe("shop", core::Site::primary, "ams", "front", true, 0.02);
  m.count_round("shop");
  m.count_round("shop");
  m.count_transition("shop", core::State::primary_active, core::State::failing_over,
                     core::Initiator::automatic);
  m.count_transition("shop", core::State::failing_over, core::State::held,
                     core::Initiator::operator_);
  m.observe_step("shop", core::Phase::failover, "dns", "ok", 1.5);
  m.count_plan("shop", core::Phase::failover, false);
  m.count_reconcile_drift("shop", "dns_record");
  const std::string text = m.render();
  const std::string p = R"(group="shop",site="primary",location="ams",probe="front")";
  CHECK(sample(text, "failoverd_probe_results_total{" + p + R"(,result="ok"})") == "2");
  CHECK(sample(text, "failoverd_probe_results_total{" + p + R"(,result="fail"})") == "1");
  CHECK(sample(text, "failoverd_probe_duration_seconds_bucket{" + p + R"(,le="0.005"})") == "1");
  CHECK(sample(text, "failoverd_probe_duration_seconds_bucket{" + p + R"(,le="0.025"})") == "2");
  CHECK(sample(text, "failoverd_probe_duration_seconds_bucket{" + p + R"(,le="+Inf"})") == "3");
  CHECK(sample(text, "failoverd_probe_duration_seconds_count{" + p + "}") == "3");
  CHECK(sample(text, R"(failoverd_rounds_total{group="shop"})") == "2");
  CHECK(sample(text, R"(failoverd_transitions_total{group="shop",from="primary_active",)"
                     R"(to="failing_over",initiator="auto"})") == "1");
  CHECK(sample(text, R"(failoverd_transitions_total{group="shop",from="failing_over",)"
                     R"(to="held",initiator="operator"})") == "1");
  CHECK(sample(text, R"(failoverd_plan_step_duration_seconds_sum{group="shop",phase="failover",)"
                     R"(step="dns",result="ok"})") == "1.5");
  CHECK(sample(text, R"(failoverd_plans_total{group="shop",phase="failover",result="failed"})") ==
        "1");
  CHECK(sample(text, R"(failoverd_reconcile_drift_total{group="shop",kind="dns_record"})") == "1");
}

TEST_CASE("build info, start time and store mirrors", "[metrics][daemon]") {
  DaemonMetrics m("1.2.3", kStart);
  std::string text = m.render();
  CHECK(sample(text, R"(failoverd_build_info{version="1.2.3"})") == "1");
  CHECK(sample(text, "failoverd_start_time_seconds") == "1700000000.5");
  CHECK(sample(text, "failoverd_store_queue_depth") == "0");
  CHECK(sample(text, "failoverd_store_records_written_total") == "0");
  m.set_store(12, 3456, 7, 8);
  text = m.render();
  CHECK(sample(text, "failoverd_store_queue_depth") == "12");
  CHECK(sample(text, "failoverd_store_records_written_total") == "3456");
  CHECK(sample(text, "failoverd_store_write_errors_total") == "7");
  CHECK(sample(text, "failoverd_store_dropped_rounds_total") == "8");
}

TEST_CASE("forget_group drops every series of that group only", "[metrics][daemon]") {
  DaemonMetrics m("1.2.3", kStart);
  for (const char* g : {"shop", "blog"}) {
    m.set_group_state(g, core::State::primary_active);
    m.set_active(g, core::Site::primary);
    m.set_site_health(g, core::Site::primary, 1, 3, 3);
    m.set_location_verdict(g, core::Site::primary, "ams", core::Verdict::healthy);
    m.observe_probe(g, core::Site::primary, "ams", "front", true, 0.01);
    m.count_round(g);
    m.count_transition(g, core::State::primary_active, core::State::held,
                       core::Initiator::operator_);
    m.observe_step(g, core::Phase::warm, "start", "ok", 2);
    m.count_plan(g, core::Phase::warm, true);
    m.count_reconcile_drift(g, "x");
  }
  m.forget_group("shop");
  const std::string text = m.render();
  CHECK(text.find("group=\"shop\"") == std::string::npos);
  CHECK(text.find("group=\"blog\"") != std::string::npos);
  CHECK(sample(text, R"(failoverd_rounds_total{group="blog"})") == "1");
}

TEST_CASE("the facade honours the series cap", "[metrics][daemon][limits]") {
  DaemonMetrics m("1.2.3", kStart, 12);
  // Six series per group: the third group no longer fits.
  m.set_group_state("a", core::State::held);
  m.set_group_state("b", core::State::held);
  m.set_group_state("c", core::State::held);
  CHECK(m.registry().dropped("failoverd_group_state") == 6);
  CHECK(m.render().find("group=\"c\"") == std::string::npos);
}

TEST_CASE("every exported family is documented in docs/metrics.md", "[metrics][docs]") {
  std::ifstream in(FO_METRICS_DOC);
  REQUIRE(in);
  std::stringstream doc;
  doc << in.rdbuf();
  DaemonMetrics m("1.2.3", kStart, 1);
  // Populate one series of every family.
  m.set_group_state("g", core::State::held);
  m.set_active("g", core::Site::primary);
  m.set_site_health("g", core::Site::primary, 1, 1, 1);
  m.set_location_verdict("g", core::Site::primary, "l", core::Verdict::healthy);
  m.observe_probe("g", core::Site::primary, "l", "p", true, 0.1);
  m.count_round("g");
  m.count_transition("g", core::State::held, core::State::held, core::Initiator::operator_);
  m.observe_step("g", core::Phase::warm, "s", "ok", 1);
  m.count_plan("g", core::Phase::warm, true);
  m.count_reconcile_drift("g", "k");
  const std::string text = m.render();
  // <regex> is avoided on purpose: GCC 12 warns inside it under ASan (-Wmaybe-uninitialized).
  std::set<std::string> families;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    const auto space = line.find(' ', 7);
    const std::string name = line.substr(7, space - 7), type = line.substr(space + 1);
    families.insert(name);
    CAPTURE(name, type);
    CHECK(doc.str().find("| `" + name + "` | " + type + " |") != std::string::npos);
  }
  CHECK(families.size() == 20);
}
