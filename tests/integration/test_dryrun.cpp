// failoverctl failover --dry-run and reconcile --dry-run: the resolved plan is printed, the
// pre-checks (or observations) run with the daemon's plugins, and nothing is changed.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/integration/harness.hpp"

using nlohmann::json;
using namespace fo::test;

namespace {

std::string config(const TempDir& dir, const std::string& check_argv0) {
  return "[daemon]\nstate_db = \"" + (dir / "s.db") + "\"\ncontrol_socket = \"" + (dir / "c.sock") +
         "\"\n"
         "[[group]]\nname = \"shop\"\n"
         "[group.primary]\nprobes = [ { kind = \"tcp\", address = \"127.0.0.1:9\" } ]\n"
         "[group.secondary]\nprobes = [ { kind = \"tcp\", address = \"127.0.0.1:9\" } ]\n"
         "[[group.failover]]\nkind = \"exec\"\nname = \"change\"\nargv = [\"/usr/bin/touch\", \"" +
         (dir / "changed") +
         "\"]\n"
         "[[group.failover]]\nkind = \"check\"\nname = \"gate\"\n"
         "probe = { kind = \"exec\", argv = [\"" +
         check_argv0 + "\"] }\n";
}

}  // namespace

TEST_CASE("failover --dry-run prints the plan, runs the pre-checks and changes nothing") {
  TempDir dir;
  SECTION("pre-checks pass") {
    write_file(dir / "f.toml", config(dir, "/bin/true"));
    RunResult r =
        run({FAILOVERCTL_BIN, "failover", "shop", "--dry-run", "--config", dir / "f.toml"}, dir);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("1. change: exec /usr/bin/touch") != std::string::npos);
    CHECK(r.out.find("2. gate: check: exec /bin/true must pass") != std::string::npos);
    CHECK(r.out.find("pre-check gate: pass") != std::string::npos);
    CHECK(r.out.find("nothing was changed") != std::string::npos);
  }
  SECTION("a failing pre-check: exit 1, with JSON lines") {
    write_file(dir / "f.toml", config(dir, "/bin/false"));
    RunResult r = run(
        {FAILOVERCTL_BIN, "--json", "failover", "shop", "--dry-run", "--config", dir / "f.toml"},
        dir);
    CHECK(r.exit_code == 1);
    std::vector<json> lines;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
    REQUIRE(lines.size() == 2);
    CHECK(lines[0]["step"] == "gate");
    CHECK(lines[0]["stage"] == "check");
    CHECK(lines[0]["result"] == "failed");
    CHECK(lines[1]["ok"] == false);
    CHECK(lines[1]["changed"] == false);
  }
  CHECK_FALSE(std::filesystem::exists(dir / "changed"));
}

TEST_CASE("reconcile --dry-run without a daemon needs --active, and changes nothing") {
  TempDir dir;
  write_file(dir / "f.toml", config(dir, "/bin/true"));
  RunResult no_daemon =
      run({FAILOVERCTL_BIN, "reconcile", "shop", "--dry-run", "--config", dir / "f.toml"}, dir);
  CHECK(no_daemon.exit_code == 3);
  CHECK(no_daemon.err.find("pass --active") != std::string::npos);
  RunResult r = run({FAILOVERCTL_BIN, "reconcile", "shop", "--dry-run", "--config", dir / "f.toml",
                     "--active", "secondary"},
                    dir);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("nothing to observe") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "changed"));
}
