// Real processes on loopback: failoverd with a local and an agent location, a real
// `failoverd --agent`, and fake agents that misbehave; observed through failoverctl --json.
// Also `failoverctl probe`, which runs one round from every location without the daemon.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/agent/fake_agent.hpp"
#include "tests/integration/harness.hpp"

using nlohmann::json;
using namespace fo::test;

namespace {

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// A TCP target that accepts connections (from the backlog) and never sends anything.
struct Target {
  int fd = -1;
  int port = 0;
  Target() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(fd, 512) == 0);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Target() { close(fd); }
};

long http_status(const std::string& url) {
  CURL* e = curl_easy_init();
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 500L);
  curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(
      e, CURLOPT_WRITEFUNCTION, +[](char*, size_t s, size_t n, void*) -> size_t { return s * n; });
  long status = 0;
  if (curl_easy_perform(e) == CURLE_OK) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(e);
  return status;
}

std::string daemon_config(const TempDir& dir, const Target& primary, const Target& secondary,
                          const std::vector<std::pair<std::string, std::string>>& agents) {
  std::string text = "[daemon]\nstate_db = \"" + (dir / "state.db") + "\"\ncontrol_socket = \"" +
                     (dir / "control.sock") +
                     "\"\nlog_level = \"debug\"\nmetrics_listen = \"\"\n"
                     "[[location]]\nname = \"here\"\nkind = \"local\"\n";
  for (const auto& [name, url] : agents)
    text += "[[location]]\nname = \"" + name + "\"\nkind = \"agent\"\nurl = \"" + url +
            "\"\ntoken_file = \"" + (dir / "token") + "\"\n";
  text +=
      "[[group]]\nname = \"shop\"\ninterval = \"500ms\"\n"
      "[group.primary]\nprobes = [ { kind = \"tcp\", name = \"app\", address = \"127.0.0.1:" +
      std::to_string(primary.port) +
      "\", timeout = \"300ms\" } ]\n"
      "[group.secondary]\nprobes = [ { kind = \"tcp\", name = \"app\", address = "
      "\"127.0.0.1:" +
      std::to_string(secondary.port) + "\", timeout = \"300ms\" } ]\n";
  return text;
}

json group_status(const TempDir& dir) {
  RunResult r = run({FAILOVERCTL_BIN, "--socket", dir / "control.sock", "--json", "status"}, dir);
  try {
    json s = json::parse(r.out);
    if (s.contains("groups") && !s["groups"].empty()) return s["groups"][0];
  } catch (const json::exception&) {
  }
  return json::object();
}

json location_of(const json& group, const std::string& name) {
  if (group.contains("locations"))
    for (const json& l : group["locations"])
      if (l.value("name", "") == name) return l;
  return json::object();
}

}  // namespace

TEST_CASE("daemon with a local and a real agent location becomes healthy", "[agent][daemon]") {
  TempDir dir;
  Target primary, secondary;
  write_file(dir / "token", "integration-token\n", 0600);
  const int agent_port = free_port();
  write_file(dir / "agent.toml", "[agent]\nlisten = \"127.0.0.1:" + std::to_string(agent_port) +
                                     "\"\ntoken_file = \"" + (dir / "token") +
                                     "\"\nlocation = \"remote\"\n");
  RunResult check =
      run({FAILOVERD_BIN, "--agent", "--check-config", "--config", dir / "agent.toml"}, dir);
  CHECK(check.exit_code == 0);
  CHECK(check.out.find("OK (agent listening on 127.0.0.1:") != std::string::npos);

  Process agent({FAILOVERD_BIN, "--agent", "--config", dir / "agent.toml"}, {}, dir / "agent.log");
  const std::string agent_url = "http://127.0.0.1:" + std::to_string(agent_port);
  REQUIRE(wait_until([&] { return http_status(agent_url + "/v1/health") == 200; }, 10s));

  write_file(dir / "failoverd.toml",
             daemon_config(dir, primary, secondary, {{"remote", agent_url}}));
  Process daemon({FAILOVERD_BIN, "--config", dir / "failoverd.toml"}, {}, dir / "daemon.log");
  json g;
  const bool healthy = wait_until(
      [&] {
        g = group_status(dir);
        const json here = location_of(g, "here"), remote = location_of(g, "remote");
        return g.contains("primary") && g["primary"].value("healthy", 0) == 2 &&
               g["secondary"].value("healthy", 0) == 2 && remote.value("stale", true) == false &&
               remote.value("primary", "") == "healthy" && here.value("stale", true) == false;
      },
      15s);
  INFO(g.dump(2) << "\n" << read_file(dir / "daemon.log").substr(0, 4000));
  REQUIRE(healthy);
  CHECK(location_of(g, "remote")["kind"] == "agent");
  CHECK(location_of(g, "remote")["detail"] == "");
  CHECK(location_of(g, "here")["kind"] == "local");
  CHECK(g["state"] == "primary_active");

  // One round from every location, without the daemon.
  RunResult probe =
      run({FAILOVERCTL_BIN, "--json", "probe", "--config", dir / "failoverd.toml"}, dir, 20s);
  INFO(probe.out << probe.err);
  CHECK(probe.exit_code == 0);
  std::vector<json> lines;
  std::istringstream in(probe.out);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  REQUIRE(lines.size() == 4);
  for (const json& l : lines) {
    CHECK(l["group"] == "shop");
    CHECK(l["probe"] == "app");
    CHECK(l["ok"] == true);
    CHECK(l["error"] == "");
    CHECK(l["latency_ms"].get<double>() >= 0);
    CHECK(l.size() == 7);
  }
  CHECK(lines[0]["location"] == "here");
  CHECK(lines[2]["location"] == "remote");
  CHECK(lines[2]["site"] == "primary");
  CHECK(lines[3]["site"] == "secondary");

  // The table form, and an agent that is gone: its checks have no result (exit 1).
  agent.signal(SIGTERM);
  CHECK(agent.wait(5s) == 0);
  RunResult table = run(
      {FAILOVERCTL_BIN, "probe", "--config", dir / "failoverd.toml", "--group", "shop"}, dir, 20s);
  CHECK(table.exit_code == 1);
  CHECK(table.out.find("GROUP") == 0);
  CHECK(table.out.find("MISSING") != std::string::npos);
  CHECK(table.out.find("no result: agent: cannot connect") != std::string::npos);
  CHECK(run({FAILOVERCTL_BIN, "probe", "--config", dir / "failoverd.toml", "--group", "nope"}, dir)
            .exit_code == 2);
  daemon.signal(SIGTERM);
  CHECK(daemon.wait(10s) == 0);
}

TEST_CASE("misbehaving agents leave their location missing and the daemon unharmed",
          "[agent][daemon]") {
  TempDir dir;
  Target primary, secondary;
  write_file(dir / "token", "integration-token\n", 0600);
  FakeAgent garbage([](const FakeRequest&) { return make_reply(200, "not json at all"); });
  FakeAgent huge([](const FakeRequest&) {
    FakeReply r;
    r.huge = 4 * 1024 * 1024;
    return r;
  });
  FakeAgent silent([](const FakeRequest&) {
    FakeReply r;
    r.never_answer = true;
    return r;
  });
  FakeAgent late([](const FakeRequest& req) {
    FakeReply r;
    const json j = json::parse(req.body);
    r.body = json{{"version", 1}, {"round", j["round"]}, {"results", json::array()}}.dump();
    r.delay = std::chrono::milliseconds(1500);
    return r;
  });
  write_file(dir / "failoverd.toml", daemon_config(dir, primary, secondary,
                                                   {{"garbage", garbage.url()},
                                                    {"huge", huge.url()},
                                                    {"silent", silent.url()},
                                                    {"late", late.url()}}));
  Process daemon({FAILOVERD_BIN, "--config", dir / "failoverd.toml"}, {}, dir / "daemon.log");
  json g;
  const bool settled = wait_until(
      [&] {
        g = group_status(dir);
        if (g.value("rounds", 0) < 6) return false;
        for (const char* name : {"garbage", "huge", "silent", "late"}) {
          const json l = location_of(g, name);
          if (l.value("stale", false) != true || l.value("detail", "").empty()) return false;
        }
        return location_of(g, "here").value("primary", "") == "healthy";
      },
      20s);
  INFO(g.dump(2));
  REQUIRE(settled);
  CHECK(location_of(g, "garbage")["detail"].get<std::string>().find(
            "agent: invalid reply: not valid JSON") == 0);
  CHECK(location_of(g, "huge")["detail"].get<std::string>().find(
            "agent: reply larger than 1048576 bytes") == 0);
  CHECK(location_of(g, "silent")["detail"].get<std::string>().find("agent: no answer within") == 0);
  CHECK(location_of(g, "late")["detail"].get<std::string>().find("agent: no answer within") == 0);
  CHECK(location_of(g, "here")["stale"] == false);
  // Missing is not failing: only "here" reports, nothing is counted unhealthy.
  CHECK(g["primary"]["reporting"] == 1);
  CHECK(g["primary"]["healthy"] == 1);
  for (const json& l : g["primary"]["locations"]) CHECK(l["verdict"] != "unhealthy");

  // Rounds go on at their pace while agents hang, and the agents are backed off: fewer
  // requests than rounds.
  const int rounds = g["rounds"].get<int>();
  REQUIRE(wait_until([&] { return group_status(dir).value("rounds", 0) >= rounds + 6; }, 10s));
  const int now_rounds = group_status(dir).value("rounds", 0);
  for (const FakeAgent* a : {&garbage, &huge, &silent, &late}) {
    CHECK(a->connections() >= 1);
    CHECK(a->connections() < std::size_t(now_rounds) / 2);
  }
  RunResult table = run({FAILOVERCTL_BIN, "--socket", dir / "control.sock", "status"}, dir);
  CHECK(table.out.find("  stale") != std::string::npos);
  CHECK(table.out.find("garbage (agent: invalid reply: not valid JSON") != std::string::npos);
  CHECK(daemon.alive());
  daemon.signal(SIGTERM);
  CHECK(daemon.wait(10s) == 0);
}
