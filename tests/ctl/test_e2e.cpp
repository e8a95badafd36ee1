// The failoverctl binary against a fake daemon (a real ControlServer with a canned handler):
// exit codes, JSON output, what is sent, and that unconfirmed disruptive verbs send nothing.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <mutex>
#include <vector>

#include "daemon/control/protocol.hpp"
#include "tests/control/server_thread.hpp"

extern char** environ;

using namespace fo::control;
using namespace fo::control::testing;
using nlohmann::json;

namespace {

const json kStatus = json::parse(R"({
  "daemon": {"version": "0.1.0", "pid": 4242, "started_ms": 1796029200000, "config": "/etc/f.toml"},
  "groups": [{"name": "shop", "state": "primary_active", "active": "primary",
              "since_ms": 1796032500000, "reason": "holding: primary 6/6 healthy",
              "secondary_warm": false, "held_reason": "", "plan": null, "rounds_below": 0,
              "primary": {"health": 1.0, "healthy": 6, "reporting": 6, "configured": 6,
                          "known": true, "locations": []},
              "secondary": {"health": null, "healthy": 0, "reporting": 1, "configured": 6,
                            "known": false, "locations": []}}]})");

const json kPlan = json::parse(R"({"group": "shop", "phase": "failover", "from": "primary",
  "to": "secondary", "steps": [{"index": 0, "name": "exec#0", "kind": "exec",
  "argv": ["/usr/local/sbin/switch", "--fast"], "timeout_ms": 120000, "retries": 0,
  "on_failure": "abort"}]})");

// The fake daemon: canned answers, and a record of every request it got.
class FakeDaemon {
 public:
  FakeDaemon()
      : path_(dir_.file("control.sock")), server_(path_, [this](const Request& r) {
          std::lock_guard lock(mutex_);
          seen_.push_back(json{{"command", r.command}, {"arguments", r.arguments}});
          return answer(r);
        }) {}

  const std::string& path() const { return path_; }
  std::vector<json> seen() {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  static json answer(const Request& r) {
    const std::string group = r.arguments.value("group", "");
    if (r.command == "status") return reply(kResultSuccess, "ok", kStatus);
    if (r.command == "version") {
      return reply(kResultSuccess, "ok", json{{"version", "0.1.0"}, {"protocol", 1}});
    }
    if (r.command == "history") {
      return reply(kResultSuccess, "ok",
                   json{{r.arguments.value("kind", "transitions"), json::array()}});
    }
    if (r.command == "plan") {
      if (group == "nosuch") return reply(kResultBadRequest, "unknown group nosuch");
      return reply(kResultSuccess, "ok", kPlan);
    }
    if (r.command == "failover") {
      if (group == "held") return reply(kResultRefused, "group held is held: maintenance");
      return reply(kResultSuccess, "failover of " + group + " started (plan 3)",
                   json{{"plan_id", 3}});
    }
    if (r.command == "hold" || r.command == "release") {
      return reply(kResultSuccess, r.command + " of " + group + " done");
    }
    return reply(kResultUnsupported, "unsupported command " + r.command);
  }

  TempDir dir_;
  std::string path_;
  std::mutex mutex_;
  std::vector<json> seen_;
  ServerThread server_;
};

struct Run {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs failoverctl with stdin from /dev/null (not a terminal) and a bounded run time.
Run run_ctl(std::vector<std::string> args, const std::string& socket_env = "") {
  args.insert(args.begin(), FAILOVERCTL_PATH);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "FAILOVERCTL_SOCKET=", 19) != 0) env_storage.emplace_back(*e);
  }
  if (!socket_env.empty()) env_storage.push_back("FAILOVERCTL_SOCKET=" + socket_env);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  REQUIRE(::pipe2(out_pipe, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err_pipe, O_CLOEXEC) == 0);
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(devnull >= 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(devnull);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  Run run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open_pipes = 2;
  while (open_pipes > 0 && std::chrono::steady_clock::now() < deadline) {
    if (::poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buffer[4096];
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, std::size_t(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_pipes;
      }
    }
  }
  if (open_pipes > 0) ::kill(pid, SIGKILL);
  for (auto& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("failoverctl status prints a table, --json the arguments", "[e2e]") {
  FakeDaemon daemon;
  Run table = run_ctl({"--socket", daemon.path(), "status"});
  CHECK(table.exit_code == 0);
  CHECK(contains(table.out, "GROUP  STATE"));
  CHECK(contains(table.out, "shop   primary_active  primary  6/6      unknown (1/6)"));
  CHECK(table.err.empty());

  Run as_json = run_ctl({"status", "--json", "--socket", daemon.path()});
  CHECK(as_json.exit_code == 0);
  json parsed = json::parse(as_json.out, nullptr, false);
  REQUIRE_FALSE(parsed.is_discarded());
  CHECK(parsed == kStatus);

  Run env = run_ctl({"--json", "version"}, daemon.path());
  CHECK(env.exit_code == 0);
  CHECK(json::parse(env.out, nullptr, false) == json{{"version", "0.1.0"}, {"protocol", 1}});
}

TEST_CASE("failoverctl history forwards its filters", "[e2e]") {
  FakeDaemon daemon;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  Run run = run_ctl({"--socket", daemon.path(), "history", "shop", "--kind", "actions", "--limit",
                     "7", "--since", "-2h", "--until", "2026-11-30T10:00:00Z"});
  CHECK(run.exit_code == 0);
  CHECK(run.out == "no actions recorded\n");
  auto seen = daemon.seen();
  REQUIRE(seen.size() == 1);
  const json& args = seen[0]["arguments"];
  CHECK(seen[0]["command"] == "history");
  CHECK(args["group"] == "shop");
  CHECK(args["kind"] == "actions");
  CHECK(args["limit"] == 7);
  CHECK(args["until_ms"] == 1796032800000);
  const int64_t since = args["since_ms"].get<int64_t>();
  CHECK(since >= now - 7200000 - 60000);
  CHECK(since <= now - 7200000 + 60000);

  Run bad = run_ctl({"--socket", daemon.path(), "history", "--since", "last tuesday"});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "invalid --since"));
  CHECK(run_ctl({"--socket", daemon.path(), "history", "--limit", "0"}).exit_code == 2);
  CHECK(daemon.seen().size() == 1);
}

TEST_CASE("failoverctl failover shows the plan, asks, and reports the outcome", "[e2e]") {
  FakeDaemon daemon;
  Run ok = run_ctl({"--socket", daemon.path(), "failover", "shop", "--yes", "--reason", "drill"});
  CHECK(ok.exit_code == 0);
  CHECK(contains(ok.out,
                 "This will fail over group shop from primary to secondary by running 1 step:\n"
                 "  1. exec#0 /usr/local/sbin/switch --fast (timeout 2m, on failure: abort)\n"));
  CHECK(contains(ok.out, "failover of shop started (plan 3)\n"));
  auto seen = daemon.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] ==
        json{{"command", "plan"}, {"arguments", {{"group", "shop"}, {"phase", "failover"}}}});
  CHECK(seen[1] == json{{"command", "failover"},
                        {"arguments", {{"group", "shop"}, {"reason", "drill"}, {"force", false}}}});

  Run as_json = run_ctl({"--socket", daemon.path(), "--json", "failover", "shop", "-y"});
  CHECK(as_json.exit_code == 0);
  json reply = json::parse(as_json.out, nullptr, false);
  CHECK(reply["result"] == 0);
  CHECK(reply["arguments"]["plan_id"] == 3);
  CHECK(contains(as_json.err, "This will fail over group shop"));
}

TEST_CASE("failoverctl exit codes: refused 1, unconfirmed 2, unreachable 3", "[e2e]") {
  FakeDaemon daemon;

  Run refused = run_ctl({"--socket", daemon.path(), "failover", "held", "--yes"});
  CHECK(refused.exit_code == 1);
  CHECK(contains(refused.err, "group held is held: maintenance (refused)"));

  Run unknown = run_ctl({"--socket", daemon.path(), "failback", "nosuch", "--yes"});
  CHECK(unknown.exit_code == 1);
  CHECK(contains(unknown.err, "unknown group nosuch"));

  const std::size_t before = daemon.seen().size();
  Run unconfirmed = run_ctl({"--socket", daemon.path(), "failover", "shop"});
  CHECK(unconfirmed.exit_code == 2);
  CHECK(contains(unconfirmed.err, "stdin is not a terminal (pass --yes)"));
  auto seen = daemon.seen();
  REQUIRE(seen.size() == before + 1);
  CHECK(seen.back()["command"] == "plan");  // asked what would happen, changed nothing

  Run hold = run_ctl({"--socket", daemon.path(), "hold", "shop"});
  CHECK(hold.exit_code == 2);
  CHECK(contains(hold.out, "This will hold group shop"));
  Run held = run_ctl({"--socket", daemon.path(), "hold", "shop", "--yes"});
  CHECK(held.exit_code == 0);
  CHECK(held.out.find("hold of shop done\n") != std::string::npos);

  Run unreachable = run_ctl({"--socket", daemon.path() + ".missing", "status"});
  CHECK(unreachable.exit_code == 3);
  CHECK(contains(unreachable.err, "(is failoverd running?)"));

  CHECK(run_ctl({"--socket", daemon.path()}).exit_code == 2);
  CHECK(run_ctl({"--socket", daemon.path(), "bogus"}).exit_code == 2);
  CHECK(run_ctl({"--help"}).exit_code == 0);
}
