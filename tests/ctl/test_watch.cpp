// `failoverctl status --watch`: frames with and without a terminal, and the binary against a
// real failoverd on loopback until SIGTERM, and against no daemon at all until SIGINT.
#include <signal.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ctl/watch.hpp"
#include "tests/integration/harness.hpp"
#include "tests/probes/test_http_server.hpp"

using namespace fo::test;
using nlohmann::json;

namespace {

const json kStatus = json::parse(R"({
  "daemon": {"version": "0.1.0", "pid": 4242, "started_ms": 1796029200000, "config": "/etc/f.toml"},
  "groups": [{"name": "shop", "state": "primary_active", "active": "primary",
              "since_ms": 1796032500000, "reason": "holding: primary 6/6 healthy",
              "secondary_warm": false, "held_reason": "", "plan": null, "rounds_below": 0,
              "primary": {"health": 1.0, "healthy": 6, "reporting": 6, "configured": 6,
                          "known": true, "locations": []},
              "secondary": {"health": 1.0, "healthy": 6, "reporting": 6, "configured": 6,
                            "known": true, "locations": []}}]})");

constexpr int64_t kNow = 1796032800000;  // 2026-11-30T10:00:00Z

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<json> json_lines(const std::string& path) {
  std::vector<json> out;
  for (const auto& line : lines_of(read_file(path))) out.push_back(json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("watch: frames redraw in place on a terminal and carry no escape codes otherwise") {
  fo::ctl::WatchSample ok{true, kStatus, ""};
  fo::ctl::WatchOptions options;
  options.interval = std::chrono::milliseconds(1500);

  options.terminal = true;
  const std::string frame = fo::ctl::watch_frame(ok, options, kNow);
  CHECK(frame.rfind("\x1b[H", 0) == 0);
  CHECK(frame.find("every 1500ms, updated 2026-11-30T10:00:00Z; Ctrl-C to quit\x1b[K\n") !=
        std::string::npos);
  CHECK(frame.find("shop") != std::string::npos);
  CHECK(frame.size() >= 3);
  CHECK(frame.substr(frame.size() - 3) == "\x1b[J");

  options.terminal = false;
  const std::string plain = fo::ctl::watch_frame(ok, options, kNow);
  CHECK(plain.find('\x1b') == std::string::npos);
  CHECK(plain.rfind("every 1500ms, updated 2026-11-30T10:00:00Z\n", 0) == 0);
  CHECK(plain.find("primary_active") != std::string::npos);

  fo::ctl::WatchSample down{false, nullptr, "cannot connect to /x.sock: No such file"};
  const std::string gone = fo::ctl::watch_frame(down, options, kNow);
  CHECK(gone.find("failoverd is unreachable: cannot connect to /x.sock: No such file\n"
                  "asking again in 1500ms\n") != std::string::npos);

  options.json = true;
  options.terminal = true;  // JSON lines never carry escape codes
  const std::string line = fo::ctl::watch_frame(ok, options, kNow);
  CHECK(lines_of(line).size() == 1);
  CHECK(json::parse(line) == kStatus);
  CHECK(json::parse(fo::ctl::watch_frame(down, options, kNow)) ==
        json{{"error", "cannot connect to /x.sock: No such file"}, {"ts_ms", kNow}});
}

TEST_CASE("watch: status --watch --json against a real daemon until SIGTERM") {
  TempDir dir;
  TestHttpServer primary, secondary;
  primary.route("/health", {});
  secondary.route("/health", {});
  write_file(dir / "f.toml",
             "[daemon]\nstate_db = \"" + (dir / "state.db") + "\"\ncontrol_socket = \"" +
                 (dir / "control.sock") +
                 "\"\nmetrics_listen = \"\"\n"
                 "[[group]]\nname = \"shop\"\ninterval = \"200ms\"\n"
                 "[group.primary]\nprobes = [ { kind = \"http\", url = \"http://127.0.0.1:" +
                 std::to_string(primary.port()) +
                 "/health\", timeout = \"150ms\" } ]\n"
                 "[group.secondary]\nprobes = [ { kind = \"http\", url = \"http://127.0.0.1:" +
                 std::to_string(secondary.port()) + "/health\", timeout = \"150ms\" } ]\n");
  Process daemon({FAILOVERD_PATH, "--config", dir / "f.toml"}, {}, dir / "daemon.log");
  REQUIRE(wait_until(
      [&] {
        return run({FAILOVERCTL_PATH, "--socket", dir / "control.sock", "status"}, dir).exit_code ==
               0;
      },
      10s));

  const std::string out = dir / "watch.out";
  Process watch({FAILOVERCTL_PATH, "--socket", dir / "control.sock", "--json", "status", "--watch",
                 "--interval", "200ms"},
                {}, out, dir / "watch.err");
  REQUIRE(wait_until([&] { return lines_of(read_file(out)).size() >= 2; }, 10s));
  watch.signal(SIGTERM);
  CHECK(watch.wait(5s) == 0);
  const auto objects = json_lines(out);
  REQUIRE(objects.size() >= 2);
  for (const json& o : objects) {
    REQUIRE(o.contains("groups"));
    CHECK(o["groups"][0]["name"] == "shop");
  }
  CHECK(read_file(out).find('\x1b') == std::string::npos);
  CHECK(read_file(dir / "watch.err").empty());
}

TEST_CASE("watch: an unreachable daemon is shown and asked again until SIGINT") {
  TempDir dir;
  const std::string out = dir / "watch.out";
  Process watch({FAILOVERCTL_PATH, "--socket", dir / "nobody.sock", "--json", "status", "--watch",
                 "--interval", "100ms"},
                {}, out, dir / "watch.err");
  REQUIRE(wait_until([&] { return lines_of(read_file(out)).size() >= 3; }, 10s));
  watch.signal(SIGINT);
  CHECK(watch.wait(5s) == 0);
  for (const json& o : json_lines(out)) {
    CHECK(o["error"].get<std::string>().find("nobody.sock") != std::string::npos);
    CHECK(o["ts_ms"].is_number_integer());
  }

  SECTION("text frames without a terminal, and a bad interval") {
    const std::string text = dir / "text.out";
    Process plain({FAILOVERCTL_PATH, "--socket", dir / "nobody.sock", "status", "--watch",
                   "--interval", "100ms"},
                  {}, text);
    REQUIRE(wait_until(
        [&] { return read_file(text).find("asking again in 100ms") != std::string::npos; }, 10s));
    plain.signal(SIGTERM);
    CHECK(plain.wait(5s) == 0);
    CHECK(read_file(text).find('\x1b') == std::string::npos);
    CHECK(read_file(text).find("failoverd is unreachable") != std::string::npos);

    RunResult r = run({FAILOVERCTL_PATH, "status", "--watch", "--interval", "10ms"}, dir);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("invalid --interval '10ms'") != std::string::npos);
  }
}
