// failoverctl views rendered from canned replies, including replies with fields missing.
#include <catch2/catch.hpp>

#include "ctl/render.hpp"

using namespace fo::ctl;
using nlohmann::json;

namespace {

constexpr int64_t kNow = 1796032800000;  // 2026-11-30T10:00:00Z

json site(int healthy, int reporting, int configured, bool known) {
  return json{{"health", known ? json(double(healthy) / reporting) : json(nullptr)},
              {"healthy", healthy},
              {"reporting", reporting},
              {"configured", configured},
              {"known", known},
              {"locations",
               {{{"name", "fra"}, {"verdict", "healthy"}, {"last_ms", kNow - 3000}},
                {{"name", "nyc"}, {"verdict", "missing"}, {"last_ms", nullptr}}}}};
}

json canned_status() {
  return json::parse(R"({
    "daemon": {"version": "0.1.0", "pid": 4242, "started_ms": 1796029200000,
               "config": "/etc/failoverd/failoverd.toml"},
    "groups": [{"name": "shop", "state": "primary_degraded", "active": "primary",
                "since_ms": 1796032500000, "reason": "warming: primary 4/6",
                "secondary_warm": true, "held_reason": "", "plan": null, "rounds_below": 2},
               {"name": "db", "state": "failing_over", "active": "primary",
                "since_ms": 1796032790000, "reason": "failing over: operator",
                "secondary_warm": false, "held_reason": "",
                "plan": {"phase": "failover", "id": 3, "initiator": "operator"},
                "rounds_below": 0}]
  })");
}

}  // namespace

TEST_CASE("times render in UTC with an age", "[render]") {
  CHECK(format_utc(0) == "1970-01-01T00:00:00Z");
  CHECK(format_utc(kNow) == "2026-11-30T10:00:00Z");
  CHECK(format_utc(kNow + 999) == "2026-11-30T10:00:00Z");
  CHECK(format_utc(-5) == "-5");
  CHECK(format_time(kNow - 90000, kNow) == "2026-11-30T09:58:30Z (1m30s ago)");
  CHECK(format_time(kNow, kNow) == "2026-11-30T10:00:00Z (just now)");
  CHECK(format_time(kNow, 0) == "2026-11-30T10:00:00Z");
}

TEST_CASE("site health is a fraction, or unknown with how many report", "[render]") {
  CHECK(site_health(site(5, 6, 6, true)) == "5/6");
  CHECK(site_health(site(1, 1, 6, false)) == "unknown (1/6)");
  CHECK(site_health(json::object()) == "?");
  CHECK(site_health(json(nullptr)) == "?");
  CHECK(site_health(json{{"known", true}}) == "?");
}

TEST_CASE("tables align columns and neutralize control characters", "[render]") {
  CHECK(render_table({"A", "LONG"}, {{"wide cell", "x"}, {"y", "z"}}) ==
        "A          LONG\n"
        "wide cell  x\n"
        "y          z\n");
  CHECK(render_table({"A", "B"}, {{"a\x1b[31m", "line\nbreak"}}) ==
        "A       B\n"
        "a [31m  line break\n");
  CHECK(render_table({"A", "B", "C"}, {{"only one"}}) ==
        "A         B  C\n"
        "only one\n");
}

TEST_CASE("status renders the group table and the location lists", "[render]") {
  json status = canned_status();
  status["groups"][0]["primary"] = site(4, 6, 6, true);
  status["groups"][0]["secondary"] = site(1, 1, 6, false);
  status["groups"][1]["primary"] = site(0, 6, 6, true);
  status["groups"][1]["secondary"] = site(6, 6, 6, true);

  const std::string expected =
      "failoverd 0.1.0 (pid 4242), up since 2026-11-30T09:00:00Z (1h ago), config "
      "/etc/failoverd/failoverd.toml\n"
      "\n"
      "GROUP  STATE             ACTIVE   PRIMARY  SECONDARY      SINCE                         "
      "  REASON\n"
      "shop   primary_degraded  primary  4/6      unknown (1/6)  2026-11-30T09:55:00Z (5m ago) "
      "  warming: primary 4/6\n"
      "db     failing_over      primary  0/6      6/6            2026-11-30T09:59:50Z (10s ago)"
      "  failing over: operator\n"
      "\n"
      "shop:\n"
      "  primary    fra healthy (3s ago), nyc missing (never)\n"
      "  secondary  fra healthy (3s ago), nyc missing (never)\n"
      "  notes      secondary warm, 2 rounds below the failover threshold\n"
      "\n"
      "db:\n"
      "  primary    fra healthy (3s ago), nyc missing (never)\n"
      "  secondary  fra healthy (3s ago), nyc missing (never)\n"
      "  plan       failover #3 (operator)\n";
  CHECK(render_status(status, kNow) == expected);
}

TEST_CASE("status survives missing and mistyped fields", "[render]") {
  const std::string empty_group = render_status(json{{"groups", {json::object()}}}, kNow);
  CHECK(empty_group.find("?      ?      ?       ?        ?          ?      ?") !=
        std::string::npos);
  CHECK(render_status(json(42), kNow) == "no groups configured\n");
  CHECK(render_status(json{{"groups", "nope"}}, kNow) == "no groups configured\n");
  json odd = canned_status();
  odd["groups"][0]["since_ms"] = "yesterday";
  odd["groups"][0]["primary"] = json{{"locations", {{{"name", 7}}, 3}}};
  odd["daemon"] = json{{"pid", "x"}};
  std::string out;
  REQUIRE_NOTHROW(out = render_status(odd, kNow));
  CHECK(out.find("failoverd ? (pid x), config ?") == 0);
  CHECK(out.find("7 ?, ? ?") != std::string::npos);
}

TEST_CASE("history renders each kind", "[render]") {
  json transitions = json::parse(R"({"transitions": [
    {"ts_ms": 1796032800000, "ts": "2026-11-30T10:00:00Z", "group": "shop",
     "from": "primary_active", "to": "failing_over", "reason": "operator failover",
     "initiator": "operator", "uid": 0},
    {"group": "shop"}]})");
  CHECK(render_history(transitions, 0) ==
        "TIME                  GROUP  FROM            TO            INITIATOR  UID  REASON\n"
        "2026-11-30T10:00:00Z  shop   primary_active  failing_over  operator   0    operator "
        "failover\n"
        "?                     shop   ?               ?             ?          ?    ?\n");

  json actions = json::parse(R"({"actions": [
    {"group": "shop", "plan_id": 3, "phase": "failover", "step_index": 0, "step_name": "exec#0",
     "kind": "exec", "attempt": 1, "started_ms": 1796032800000, "ended_ms": 1796032802000,
     "result": "ok", "exit_code": 0, "output": "switched\nsecond line", "initiator": "operator"},
    {"group": "shop", "plan_id": 3, "phase": "failover", "step_index": 1, "step_name": "dns#0",
     "started_ms": 1796032801500, "ended_ms": null}]})");
  const std::string a = render_history(actions, 0);
  CHECK(a.find("STARTED               GROUP  PLAN  PHASE     STEP  NAME    TRY  RESULT  EXIT  "
               "TOOK     OUTPUT\n") == 0);
  CHECK(a.find("exec#0  1    ok      0     2s       switched\n") != std::string::npos);
  CHECK(a.find("dns#0   ?    ?       ?     running  ?\n") != std::string::npos);

  json rounds = json{{"rounds",
                      {{{"ts_ms", kNow},
                        {"group", "shop"},
                        {"state", "primary_active"},
                        {"primary", site(6, 6, 6, true)},
                        {"secondary", site(0, 1, 6, false)}}}}};
  CHECK(render_history(rounds, 0) ==
        "TIME                  GROUP  STATE           PRIMARY  SECONDARY\n"
        "2026-11-30T10:00:00Z  shop   primary_active  6/6      unknown (1/6)\n");

  json commands = json{{"commands",
                        {{{"ts_ms", kNow},
                          {"group", "shop"},
                          {"command", "hold"},
                          {"uid", 1000},
                          {"arguments", {{"reason", "maintenance"}}},
                          {"result", 0}}}}};
  CHECK(render_history(commands, 0) ==
        "TIME                  GROUP  COMMAND  UID   RESULT  ARGUMENTS\n"
        "2026-11-30T10:00:00Z  shop   hold     1000  0       {\"reason\":\"maintenance\"}\n");

  CHECK(render_history(json{{"transitions", json::array()}}, 0) == "no transitions recorded\n");
  CHECK(render_history(json::object(), 0) == "the reply holds no history\n");
  CHECK(render_history(json{{"actions", {1, "x", nullptr}}}, 0).find("?") != std::string::npos);
}

TEST_CASE("version shows both sides", "[render]") {
  CHECK(render_version(json{{"version", "0.1.0"}, {"protocol", 1}}, "0.1.0") ==
        "failoverctl 0.1.0\nfailoverd 0.1.0 (protocol 1)\n");
  CHECK(render_version(json(nullptr), "0.1.0") == "failoverctl 0.1.0\nfailoverd ? (protocol ?)\n");
}

TEST_CASE("disruptive verbs describe what will happen", "[render]") {
  json plan = json::parse(R"({"group": "shop", "phase": "failover", "from": "primary",
    "to": "secondary", "steps": [
      {"index": 0, "name": "exec#0", "kind": "exec", "argv": ["/usr/local/sbin/x", "--fast"],
       "timeout_ms": 120000, "retries": 0, "on_failure": "abort"},
      {"index": 1, "name": "dns#0", "kind": "dns", "argv": [], "timeout_ms": 30000,
       "retries": 2},
      {"index": 2, "name": "exec#1", "argv": ["/bin/echo", "it's done", "$HOME"]}]})");
  CHECK(describe_change("failover", "shop", plan, false) ==
        "This will fail over group shop from primary to secondary by running 3 steps:\n"
        "  1. exec#0 /usr/local/sbin/x --fast (timeout 2m, on failure: abort)\n"
        "  2. dns#0 (timeout 30s, 2 retries)\n"
        "  3. exec#1 /bin/echo 'it'\\''s done' '$HOME'\n");
  CHECK(describe_change("failover", "shop", plan, true)
            .find("--force: the secondary's health is not checked.\n") != std::string::npos);

  json back = json{{"from", "secondary"}, {"to", "primary"}, {"steps", json::array()}};
  CHECK(describe_change("failback", "shop", back, false) ==
        "This will fail back group shop from secondary to primary; the plan has no steps.\n");
  CHECK(describe_change("failback", "shop", json(nullptr), false) ==
        "This will fail back group shop from ? to ?; the plan has no steps.\n");
  CHECK(describe_change("hold", "shop", json(nullptr), false).find("This will hold group shop") ==
        0);
  CHECK(describe_change("release", "shop", json(nullptr), false) ==
        "This will release group shop: automatic decisions resume.\n");
}
