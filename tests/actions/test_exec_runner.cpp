// ExecRunner against real child processes: outcomes, environment, output bounds, timeouts
// with process-group kills, the executable security check, cancel and destruction.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <optional>
#include <set>

#include "actions/exec/exec_runner.hpp"
#include "actions/exec/secure_path.hpp"
#include "test_support.hpp"

using namespace fo::actions;
using namespace fo::actions::test;
using Outcome = ExecResult::Outcome;

namespace {

struct Fixture {
  std::unique_ptr<sd_event, EventDeleter> loop = new_loop();
  TempDir dir;
  std::unique_ptr<ExecRunner> runner = std::make_unique<ExecRunner>(loop.get());

  // Starts the request and drives the loop until the callback ran (bounded).
  std::optional<ExecResult> run(ExecRequest req, std::chrono::milliseconds limit = 10s) {
    std::optional<ExecResult> got;
    int calls = 0;
    runner->start(std::move(req), [&](ExecResult r) {
      ++calls;
      got = std::move(r);
    });
    REQUIRE(calls == 0);  // never from inside start()
    run_until(
        loop.get(), [&] { return calls > 0; }, limit);
    run_for(loop.get(), 20ms);  // a second call would show up here
    REQUIRE(calls <= 1);
    return got;
  }
};

ExecRequest req(std::vector<std::string> argv,
                const std::function<void(ExecRequest&)>& tweak = {}) {
  ExecRequest r;
  r.argv = std::move(argv);
  if (tweak) tweak(r);
  return r;
}

std::set<std::string> lines(const std::string& s) {
  std::set<std::string> out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    auto nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    out.insert(s.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("exec: exit 0 with stdout and stderr interleaved in one excerpt", "[exec]") {
  Fixture f;
  auto script = f.dir.write("ok.sh", "#!/bin/sh\necho out\necho err >&2\nexit 0\n");
  auto r = f.run(req({script}));
  REQUIRE(r);
  CHECK(r->outcome == Outcome::exited);
  CHECK(r->ok());
  CHECK(r->exit_code == 0);
  CHECK(r->output == "out\nerr\n");
  CHECK_FALSE(r->output_truncated);
  CHECK(r->summary() == "exited 0");
  CHECK(f.runner->running() == 0);
}

TEST_CASE("exec: non-zero exit code", "[exec]") {
  Fixture f;
  auto script = f.dir.write("three.sh", "#!/bin/sh\nexit 3\n");
  auto r = f.run(req({script}));
  REQUIRE(r);
  CHECK(r->outcome == Outcome::exited);
  CHECK_FALSE(r->ok());
  CHECK(r->exit_code == 3);
  CHECK(r->summary() == "exited 3");
}

TEST_CASE("exec: killed by a signal", "[exec]") {
  Fixture f;
  auto script = f.dir.write("suicide.sh", "#!/bin/sh\nkill -KILL $$\n");
  auto r = f.run(req({script}));
  REQUIRE(r);
  CHECK(r->outcome == Outcome::signaled);
  CHECK(r->signal == SIGKILL);
  CHECK(r->summary() == "killed by signal 9");
  CHECK(r->error.find("SIGKILL") != std::string::npos);
  CHECK_FALSE(r->ok());
}

TEST_CASE("exec: environment is PATH plus the request env, nothing from the parent", "[exec]") {
  Fixture f;
  REQUIRE(setenv("FO_ACTIONS_TEST_SECRET", "leaked", 1) == 0);
  auto r = f.run(req({"/usr/bin/env"}, [&](ExecRequest& q) {
    q.env = {{"FAILOVER_GROUP", "web"}, {"FAILOVER_PHASE", "failover"}};
  }));
  unsetenv("FO_ACTIONS_TEST_SECRET");
  REQUIRE(r);
  REQUIRE(r->ok());
  CHECK(lines(r->output) == std::set<std::string>{"FAILOVER_GROUP=web", "FAILOVER_PHASE=failover",
                                                  std::string("PATH=") + kChildPath});
}

TEST_CASE("exec: argv goes verbatim to the program, never through a shell", "[exec]") {
  Fixture f;
  auto script = f.dir.write("args.sh", "#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\n");
  const std::string marker = f.dir.file("injected");
  auto r = f.run(req({script, "a b", "$(touch " + marker + ")", "*", ";", ""}));
  REQUIRE(r);
  REQUIRE(r->ok());
  CHECK(r->output == "[a b]\n[$(touch " + marker + ")]\n[*]\n[;]\n[]\n");
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("exec: child gets stdin /dev/null, cwd /, and no inherited descriptors", "[exec]") {
  Fixture f;
  // A descriptor without O_CLOEXEC in the parent must still not reach the child.
  int leaky = open("/dev/null", O_RDONLY);
  REQUIRE(leaky >= 3);
  auto r = f.run(req({"/usr/bin/ls", "/proc/self/fd"}));
  close(leaky);
  REQUIRE(r);
  REQUIRE(r->ok());
  CHECK(r->output == "0\n1\n2\n3\n");  // ls itself holds fd 3 on the directory it lists

  auto script = f.dir.write("stdin.sh", "#!/bin/sh\ncat\npwd\n");
  auto r2 = f.run(req({script}));
  REQUIRE(r2);
  REQUIRE(r2->ok());
  CHECK(r2->output == "/\n");
}

TEST_CASE("exec: output is capped and a 10 MB writer does not hang", "[exec]") {
  Fixture f;
  auto script =
      f.dir.write("flood.sh", "#!/bin/sh\n/usr/bin/head -c 10485760 /dev/zero\necho done >&2\n");
  auto r = f.run(req({script}, [&](ExecRequest& q) { q.output_cap = 4096; }), 20s);
  REQUIRE(r);
  CHECK(r->ok());
  CHECK(r->output.size() == 4096);
  CHECK(r->output_truncated);

  auto small = f.dir.write("small.sh", "#!/bin/sh\nprintf 12345\n");
  auto r2 = f.run(req({small}, [&](ExecRequest& q) { q.output_cap = 5; }));
  REQUIRE(r2);
  CHECK(r2->output == "12345");
  CHECK_FALSE(r2->output_truncated);
}

TEST_CASE("exec: timeout kills the whole process group", "[exec][timeout]") {
  Fixture f;
  auto script = f.dir.write("hang.sh",
                            "#!/bin/sh\n/usr/bin/sleep 30 &\necho $! > \"$1\"\necho $$ > \"$2\"\n"
                            "wait\n");
  const auto grandchild_file = f.dir.file("grandchild.pid");
  const auto child_file = f.dir.file("child.pid");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = f.run(req({script, grandchild_file, child_file}, [&](ExecRequest& q) {
    q.timeout = 300ms;
    q.kill_grace = 500ms;
  }));
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  REQUIRE(r);
  CHECK(r->outcome == Outcome::timed_out);
  CHECK(r->summary() == "timed out after 300ms");
  CHECK_FALSE(r->ok());
  CHECK(elapsed >= 300ms);
  CHECK(elapsed < 300ms + 500ms + 1500ms);
  CHECK(r->duration < 300ms + 500ms + 1500ms);
  const pid_t grandchild = static_cast<pid_t>(std::stol(read_file(grandchild_file)));
  const pid_t child = static_cast<pid_t>(std::stol(read_file(child_file)));
  CHECK_FALSE(pid_alive(grandchild));
  CHECK_FALSE(pid_alive(child));
}

TEST_CASE("exec: a group ignoring SIGTERM gets SIGKILL after the grace", "[exec][timeout]") {
  Fixture f;
  // The trap makes sh and its background child ignore SIGTERM.
  auto script = f.dir.write("stubborn.sh",
                            "#!/bin/sh\ntrap '' TERM\n/usr/bin/sleep 30 &\necho $! > \"$1\"\n"
                            "while :; do /usr/bin/sleep 1; done\n");
  const auto pid_file = f.dir.file("grandchild.pid");
  auto r = f.run(req({script, pid_file}, [&](ExecRequest& q) {
    q.timeout = 200ms;
    q.kill_grace = 300ms;
  }));
  REQUIRE(r);
  CHECK(r->outcome == Outcome::timed_out);
  CHECK(r->signal == SIGKILL);
  CHECK(r->duration >= 450ms);
  CHECK(r->duration < 200ms + 300ms + 1500ms);
  const pid_t grandchild = static_cast<pid_t>(std::stol(read_file(pid_file)));
  CHECK_FALSE(pid_alive(grandchild));
}

TEST_CASE("exec: a grandchild holding the pipe does not delay completion", "[exec]") {
  Fixture f;
  auto script = f.dir.write("detach.sh",
                            "#!/bin/sh\n/usr/bin/sleep 30 &\necho $! > \"$1\"\necho bye\nexit 0\n");
  const auto pid_file = f.dir.file("grandchild.pid");
  auto r = f.run(req({script, pid_file}, [&](ExecRequest& q) { q.timeout = 20s; }), 3s);
  REQUIRE(r);
  CHECK(r->ok());
  CHECK(r->output == "bye\n");
  CHECK(r->duration < 1500ms);
  const pid_t grandchild = static_cast<pid_t>(std::stol(read_file(pid_file)));
  kill(grandchild, SIGKILL);  // a deliberate background process is not ours to kill
}

TEST_CASE("exec: unsafe or unusable executables are refused, asynchronously", "[exec][refuse]") {
  Fixture f;
  auto refused = [&](ExecRequest req) {
    auto r = f.run(std::move(req));
    REQUIRE(r);
    CHECK(r->outcome == Outcome::refused);
    CHECK_FALSE(r->ok());
    CHECK(r->summary() == "refused: " + r->error);
    return r->error;
  };
  const std::string body = "#!/bin/sh\nexit 0\n";

  SECTION("relative path") {
    CHECK(refused(req({"bin/true"})) == "bin/true is not an absolute path");
  }
  SECTION("missing file") {
    auto p = f.dir.file("missing.sh");
    CHECK(refused(req({p})) == p + " does not exist");
  }
  SECTION("not executable") {
    auto p = f.dir.write("plain.sh", body, 0644);
    CHECK(refused(req({p})) == p + " is not executable");
  }
  SECTION("a directory") {
    CHECK(refused(req({f.dir.path()})) == f.dir.path() + " is not a regular file");
  }
  SECTION("group-writable script") {
    auto p = f.dir.write("gw.sh", body, 0775);
    CHECK(refused(req({p})) == p + " is writable by group");
  }
  SECTION("world-writable script") {
    auto p = f.dir.write("ow.sh", body, 0757);
    CHECK(refused(req({p})) == p + " is writable by others");
  }
  SECTION("script owned by another user") {
    auto p = f.dir.write("other.sh", body, 0755);
    REQUIRE(chown(p.c_str(), 4242, 0) == 0);
    CHECK(refused(req({p})) == p + " is owned by uid 4242");
  }
  SECTION("world-writable parent directory") {
    auto p = f.dir.write("ok.sh", body, 0755);
    REQUIRE(chmod(f.dir.path().c_str(), 0777) == 0);
    CHECK(refused(req({p})) == "directory " + f.dir.path() + " is writable by group and others");
  }
  SECTION("symlink placed in a world-writable directory") {
    REQUIRE(mkdir(f.dir.file("open").c_str(), 0755) == 0);
    REQUIRE(chmod(f.dir.file("open").c_str(), 0777) == 0);
    const auto link = f.dir.file("open/true");
    REQUIRE(symlink("/usr/bin/true", link.c_str()) == 0);
    CHECK(refused(req({link})) ==
          "directory " + f.dir.file("open") + " is writable by group and others");
  }
  SECTION("empty argv") {
    CHECK(refused(req({})) == "empty argv");
  }
  SECTION("bad environment name") {
    CHECK(refused(req({"/usr/bin/true"}, [&](ExecRequest& q) {
            q.env = {{"A=B", "x"}};
          })) == "invalid environment variable name 'A=B'");
  }
  SECTION("non-positive timeout") {
    CHECK(refused(req({"/usr/bin/true"}, [&](ExecRequest& q) { q.timeout = 0ms; })) ==
          "timeout must be positive");
  }
}

TEST_CASE("exec: a sticky world-writable directory (like /tmp) is accepted", "[exec][refuse]") {
  Fixture f;
  auto p = f.dir.write("ok.sh", "#!/bin/sh\nexit 0\n", 0755);
  REQUIRE(chmod(f.dir.path().c_str(), 01777) == 0);
  auto r = f.run(req({p}));
  REQUIRE(r);
  CHECK(r->ok());
}

TEST_CASE("exec: check_executable resolves symlinks and checks the target", "[exec][refuse]") {
  TempDir dir;
  auto target = dir.write("target.sh", "#!/bin/sh\n", 0775);
  const auto link = dir.file("link.sh");
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  auto bad = check_executable(link, geteuid());
  CHECK_FALSE(bad.ok);
  CHECK(bad.reason == link + " (-> " + target + ") is writable by group");

  REQUIRE(chmod(target.c_str(), 0755) == 0);
  auto good = check_executable(link, geteuid());
  CHECK(good.ok);
  CHECK(good.resolved == target);
}

TEST_CASE("exec: a script without #! fails to spawn instead of going to a shell", "[exec]") {
  Fixture f;
  auto p = f.dir.write("noshebang", "touch " + f.dir.file("ran") + "\n", 0755);
  auto r = f.run(req({p}));
  REQUIRE(r);
  CHECK(r->outcome == Outcome::spawn_failed);
  CHECK(r->summary().rfind("spawn failed: ", 0) == 0);
  CHECK(r->error.find("Exec format error") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(f.dir.file("ran")));
}

TEST_CASE("exec: destroying the runner kills and reaps a running child", "[exec]") {
  Fixture f;
  auto script = f.dir.write("long.sh", "#!/bin/sh\necho $$ > \"$1\"\nexec /usr/bin/sleep 30\n");
  const auto pid_file = f.dir.file("child.pid");
  bool called = false;
  f.runner->start(req({script, pid_file}), [&](ExecResult) { called = true; });
  const pid_t pid = wait_for_pid_file(f.loop.get(), pid_file, 5s);
  REQUIRE(pid > 0);
  REQUIRE(pid_alive(pid));
  f.runner.reset();
  CHECK_FALSE(called);
  CHECK_FALSE(pid_exists(pid));  // gone, not even a zombie
  errno = 0;
  CHECK(waitpid(pid, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  run_for(f.loop.get(), 20ms);
  CHECK_FALSE(called);
}

TEST_CASE("exec: cancel kills the child, drops the callback, and the loop reaps it", "[exec]") {
  Fixture f;
  auto script = f.dir.write("long.sh", "#!/bin/sh\necho $$ > \"$1\"\nexec /usr/bin/sleep 30\n");
  const auto pid_file = f.dir.file("child.pid");
  bool called = false;
  auto id = f.runner->start(req({script, pid_file}), [&](ExecResult) { called = true; });
  const pid_t pid = wait_for_pid_file(f.loop.get(), pid_file, 5s);
  REQUIRE(pid > 0);
  CHECK(f.runner->running() == 1);
  f.runner->cancel(id);
  CHECK(f.runner->running() == 0);
  CHECK(run_until(
      f.loop.get(), [&] { return !pid_exists(pid); }, 5s));
  run_for(f.loop.get(), 20ms);
  CHECK_FALSE(called);
  f.runner->cancel(id);  // twice is harmless
  f.runner->cancel(12345);
}

TEST_CASE("exec: cancel before a refusal is delivered drops it", "[exec]") {
  Fixture f;
  bool called = false;
  auto id = f.runner->start(req({"relative"}), [&](ExecResult) { called = true; });
  f.runner->cancel(id);
  run_for(f.loop.get(), 30ms);
  CHECK_FALSE(called);
}

TEST_CASE("exec: many children in parallel all complete, each exactly once", "[exec]") {
  Fixture f;
  auto script = f.dir.write("n.sh", "#!/bin/sh\necho \"$1\"\nexit \"$1\"\n");
  constexpr int kJobs = 20;
  std::map<int, int> calls;
  std::map<int, ExecResult> results;
  for (int i = 0; i < kJobs; ++i) {
    f.runner->start(req({script, std::to_string(i)}), [&, i](ExecResult r) {
      ++calls[i];
      results[i] = std::move(r);
    });
  }
  CHECK(f.runner->running() == kJobs);
  REQUIRE(run_until(
      f.loop.get(), [&] { return static_cast<int>(calls.size()) == kJobs; }, 20s));
  run_for(f.loop.get(), 20ms);
  for (int i = 0; i < kJobs; ++i) {
    CHECK(calls[i] == 1);
    CHECK(results[i].exit_code == i);
    CHECK(results[i].output == std::to_string(i) + "\n");
  }
  CHECK(f.runner->running() == 0);
}

TEST_CASE("exec: a completion callback may start the next job", "[exec]") {
  Fixture f;
  auto script = f.dir.write("ok.sh", "#!/bin/sh\nexit 0\n");
  int done = 0;
  f.runner->start(req({script}), [&](ExecResult r) {
    CHECK(r.ok());
    ++done;
    f.runner->start(req({script}), [&](ExecResult r2) {
      CHECK(r2.ok());
      ++done;
    });
  });
  REQUIRE(run_until(
      f.loop.get(), [&] { return done == 2; }, 10s));
}
