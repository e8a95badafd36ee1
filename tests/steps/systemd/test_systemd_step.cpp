// The systemd step against a private dbus-daemon and the stand-in manager (fake_manager.cpp),
// driven on a real sd-event loop.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <optional>

#include "actions/systemd/systemd_step.hpp"
#include "daemon/platform/event.hpp"
#include "tests/integration/harness.hpp"
#include "tests/platform/loop_util.hpp"

using namespace std::chrono_literals;
using fo::actions::StepAttempt;
using fo::actions::StepContext;
using fo::actions::StepOutcome;
using fo::actions::StepPlugin;

namespace {

// A private bus: session-like, listening on a unix path in a temp dir, allowing everything.
// Killed (and its socket dir removed) when the object goes away, also when a REQUIRE fails.
class PrivateBus {
 public:
  PrivateBus() {
    address_ = "unix:path=" + dir_ / "bus";
    const std::string conf = dir_ / "bus.conf";
    fo::test::write_file(
        conf, R"(<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>)" + address_ +
                  R"(</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
)");
    daemon_ = std::make_unique<fo::test::Process>(
        std::vector<std::string>{"/usr/bin/dbus-daemon", "--config-file=" + conf, "--nofork",
                                 "--print-address"},
        std::map<std::string, std::string>{}, dir_ / "dbus.out");
    const bool up = fo::test::wait_until(
        [&] {
          return fo::test::read_file(dir_ / "dbus.out").find("unix:path=") != std::string::npos;
        },
        10s);
    if (!up)
      throw std::runtime_error("dbus-daemon did not start: " +
                               fo::test::read_file(dir_ / "dbus.out"));
  }
  const std::string& address() const { return address_; }
  void kill() { daemon_.reset(); }
  std::string path(const std::string& name) const { return dir_ / name; }

 private:
  fo::test::TempDir dir_;
  std::string address_;
  std::unique_ptr<fo::test::Process> daemon_;
};

// The stand-in manager on `bus`, with knobs (see fake_manager.cpp).
class FakeManager {
 public:
  FakeManager(const PrivateBus& bus, std::vector<std::string> knobs)
      : out_(bus.path("manager.out")) {
    std::vector<std::string> argv = {FO_FAKE_MANAGER, "--address", bus.address()};
    argv.insert(argv.end(), knobs.begin(), knobs.end());
    process_ =
        std::make_unique<fo::test::Process>(argv, std::map<std::string, std::string>{}, out_);
    if (!fo::test::wait_until([&] { return log().find("READY") != std::string::npos; }, 10s))
      throw std::runtime_error("fake manager did not start: " + log());
  }
  std::string log() const { return fo::test::read_file(out_); }
  std::size_t jobs() const {
    const std::string text = log();
    std::size_t n = 0;
    for (auto at = text.find("JOB "); at != std::string::npos; at = text.find("JOB ", at + 1)) ++n;
    return n;
  }

 private:
  std::string out_;
  std::unique_ptr<fo::test::Process> process_;
};

fo::config::Step unit_step(const std::string& address, const std::string& unit,
                           const std::string& action, std::chrono::milliseconds timeout = 5s) {
  fo::config::Step s;
  s.kind = "systemd";
  s.name = "unit";
  s.timeout = timeout;
  s.systemd.unit = unit;
  s.systemd.action = action;
  s.systemd.bus_address = address;
  return s;
}

enum class Op { apply, check, observe };

struct Rig {
  fo::platform::EventPtr loop = fo::platform::make_event();
  std::unique_ptr<StepPlugin> plugin = fo::actions::make_systemd_step_plugin(loop.get());

  StepOutcome run(Op op, const fo::config::Step& step) {
    std::optional<StepOutcome> got;
    int calls = 0;
    auto done = [&](StepOutcome o) {
      ++calls;
      got = std::move(o);
    };
    StepContext ctx;
    ctx.group = "shop";
    ctx.idempotency_key = "shop/1/0";
    std::unique_ptr<StepAttempt> attempt = op == Op::apply   ? plugin->apply(step, ctx, done)
                                           : op == Op::check ? plugin->check(step, ctx, done)
                                                             : plugin->observe(step, ctx, done);
    REQUIRE(attempt);
    REQUIRE_FALSE(got);  // never inside apply()/check()/observe()
    REQUIRE(fo::test::run_until(
        loop.get(), [&] { return got.has_value(); }, 15s));
    attempt.reset();
    CHECK(calls == 1);
    return *got;
  }
};

}  // namespace

TEST_CASE("systemd start runs a job and verifies ActiveState", "[systemd]") {
  PrivateBus bus;
  FakeManager manager(bus, {"--unit", "web.service=inactive"});
  Rig rig;
  const auto step = unit_step(bus.address(), "web.service", "start");

  StepOutcome o = rig.run(Op::observe, step);
  CHECK_FALSE(o.ok());
  CHECK(o.detail == "web.service is inactive, expected active");

  o = rig.run(Op::apply, step);
  INFO(o.detail);
  REQUIRE(o.ok());
  CHECK_FALSE(o.already_done);
  CHECK(o.detail.rfind("web.service started: job done, ActiveState active after ", 0) == 0);
  CHECK(manager.log().find("JOB start web.service 1 done") != std::string::npos);

  o = rig.run(Op::observe, step);
  CHECK(o.ok());
  CHECK(o.detail == "web.service is active");
}

TEST_CASE("systemd start of an active unit is already done without a job", "[systemd]") {
  PrivateBus bus;
  FakeManager manager(bus, {"--unit", "db.service=active"});
  Rig rig;
  StepOutcome o = rig.run(Op::apply, unit_step(bus.address(), "db.service", "start"));
  REQUIRE(o.ok());
  CHECK(o.already_done);
  CHECK(o.detail == "db.service already active");
  CHECK(manager.jobs() == 0);

  // restart always restarts.
  o = rig.run(Op::apply, unit_step(bus.address(), "db.service", "restart"));
  REQUIRE(o.ok());
  CHECK_FALSE(o.already_done);
  CHECK(o.detail.rfind("db.service restarted: job done", 0) == 0);
  CHECK(manager.jobs() == 1);
  CHECK(manager.log().find("JOB restart db.service") != std::string::npos);
}

TEST_CASE("systemd failed job reports the job result", "[systemd]") {
  PrivateBus bus;
  FakeManager manager(bus, {"--unit", "web.service=inactive", "--fail", "web.service=failed",
                            "--fail", "dep.service=dependency"});
  Rig rig;
  StepOutcome o = rig.run(Op::apply, unit_step(bus.address(), "web.service", "start"));
  CHECK_FALSE(o.ok());
  CHECK(o.status == StepOutcome::Status::failed);
  CHECK(o.retryable);
  CHECK(o.detail == "start job for web.service finished with result 'failed'");

  o = rig.run(Op::apply, unit_step(bus.address(), "dep.service", "start"));
  CHECK_FALSE(o.ok());
  CHECK(o.detail.find("result 'dependency'") != std::string::npos);
}

TEST_CASE("systemd unknown unit and access denied are not retried", "[systemd]") {
  PrivateBus bus;
  FakeManager manager(bus, {"--unit", "web.service=inactive", "--deny", "locked.service"});
  Rig rig;
  StepOutcome o = rig.run(Op::apply, unit_step(bus.address(), "ghost.service", "start"));
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);
  CHECK(o.detail == "unit ghost.service not found");

  o = rig.run(Op::apply, unit_step(bus.address(), "ghost.service", "stop"));
  CHECK_FALSE(o.retryable);

  o = rig.run(Op::check, unit_step(bus.address(), "ghost.service", "start"));
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);

  o = rig.run(Op::apply, unit_step(bus.address(), "locked.service", "start"));
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);
  CHECK(o.detail.rfind("StartUnit locked.service: access denied "
                       "(org.freedesktop.DBus.Error.AccessDenied",
                       0) == 0);
  CHECK(manager.jobs() == 0);
}

TEST_CASE("systemd stop runs a job, a second stop is already done", "[systemd]") {
  PrivateBus bus;
  FakeManager manager(bus, {"--unit", "web.service=active"});
  Rig rig;
  const auto step = unit_step(bus.address(), "web.service", "stop");
  StepOutcome o = rig.run(Op::apply, step);
  INFO(o.detail);
  REQUIRE(o.ok());
  CHECK_FALSE(o.already_done);
  CHECK(o.detail.rfind("web.service stopped: job done, ActiveState inactive", 0) == 0);
  CHECK(rig.run(Op::observe, step).ok());

  o = rig.run(Op::apply, step);
  CHECK(o.ok());
  CHECK(o.already_done);
  CHECK(manager.jobs() == 1);
}

TEST_CASE("systemd job slower than the timeout times out", "[systemd]") {
  PrivateBus bus;
  FakeManager manager(bus, {"--unit", "slow.service=inactive", "--delay", "slow.service=5000"});
  Rig rig;
  const auto t0 = std::chrono::steady_clock::now();
  StepOutcome o = rig.run(Op::apply, unit_step(bus.address(), "slow.service", "start", 400ms));
  const double ms = fo::test::ms_since(t0);
  INFO(o.detail);
  CHECK(o.status == StepOutcome::Status::timed_out);
  CHECK(o.detail.rfind("timed out after 400 ms waiting for job /org/freedesktop/systemd1/job/1 "
                       "(start slow.service)",
                       0) == 0);
  CHECK(ms >= 350);
  CHECK(ms < 2000);
}

TEST_CASE("systemd without a bus gives a clear error", "[systemd]") {
  PrivateBus bus;  // only for a temp dir; nothing listens at "missing"
  Rig rig;
  const std::string missing = "unix:path=" + bus.path("missing");
  StepOutcome o = rig.run(Op::apply, unit_step(missing, "web.service", "start"));
  CHECK_FALSE(o.ok());
  CHECK(o.detail == "cannot connect to the bus at " + missing + ": No such file or directory");

  // No bus_address: the system bus, here redirected by the standard variable.
  const char* old = std::getenv("DBUS_SYSTEM_BUS_ADDRESS");
  const std::string saved = old ? old : "";
  setenv("DBUS_SYSTEM_BUS_ADDRESS", missing.c_str(), 1);
  o = rig.run(Op::check, unit_step("", "web.service", "start"));
  if (old)
    setenv("DBUS_SYSTEM_BUS_ADDRESS", saved.c_str(), 1);
  else
    unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
  CHECK_FALSE(o.ok());
  CHECK(o.detail ==
        "cannot connect to the system bus at " + missing + ": No such file or directory");
  CHECK(fo::actions::system_bus_address() ==
        (old ? saved : std::string("unix:path=/run/dbus/system_bus_socket")));
}

TEST_CASE("systemd bus without a manager is a retryable failure", "[systemd]") {
  PrivateBus bus;
  Rig rig;
  StepOutcome o = rig.run(Op::apply, unit_step(bus.address(), "web.service", "start"));
  CHECK_FALSE(o.ok());
  CHECK(o.retryable);
  CHECK(o.detail.find("systemd is not on the bus at " + bus.address()) != std::string::npos);
}

TEST_CASE("systemd check wants a loaded unit", "[systemd]") {
  PrivateBus bus;
  FakeManager manager(bus, {"--unit", "web.service=inactive"});
  Rig rig;
  StepOutcome o = rig.run(Op::check, unit_step(bus.address(), "web.service", "start"));
  CHECK(o.ok());
  CHECK(o.detail == "web.service is loaded (ActiveState inactive)");
  CHECK(manager.jobs() == 0);
}

TEST_CASE("systemd attempt destroyed while the job runs calls nothing", "[systemd]") {
  PrivateBus bus;
  FakeManager manager(bus, {"--unit", "slow.service=inactive", "--delay", "slow.service=300"});
  Rig rig;
  bool called = false;
  auto attempt = rig.plugin->apply(unit_step(bus.address(), "slow.service", "start"), {},
                                   [&](StepOutcome) { called = true; });
  // The job call is answered at once; its JobRemoved comes 300 ms later.
  fo::test::run_until(
      rig.loop.get(), [] { return false; }, 100ms);
  REQUIRE(manager.log().find("JOB ") == std::string::npos);
  attempt.reset();
  REQUIRE(fo::test::run_until(
      rig.loop.get(), [&] { return manager.log().find("JOB ") != std::string::npos; }, 5s));
  fo::test::run_until(
      rig.loop.get(), [] { return false; }, 100ms);
  CHECK_FALSE(called);
}

TEST_CASE("systemd bus lost while waiting for the job fails at once", "[systemd]") {
  PrivateBus bus;
  FakeManager manager(bus, {"--unit", "slow.service=inactive", "--delay", "slow.service=5000"});
  Rig rig;
  std::optional<StepOutcome> got;
  auto attempt = rig.plugin->apply(unit_step(bus.address(), "slow.service", "start", 10s), {},
                                   [&](StepOutcome o) { got = std::move(o); });
  // The job call is answered at once; the job itself takes 5 s.
  fo::test::run_until(
      rig.loop.get(), [] { return false; }, 200ms);
  REQUIRE_FALSE(got);
  const auto t0 = std::chrono::steady_clock::now();
  bus.kill();
  REQUIRE(fo::test::run_until(
      rig.loop.get(), [&] { return got.has_value(); }, 5s));
  CHECK(fo::test::ms_since(t0) < 2000);
  CHECK_FALSE(got->ok());
  CHECK(got->retryable);
  CHECK(got->detail.rfind(
            "lost the connection to the bus at " + bus.address() + " while waiting for job ", 0) ==
        0);
}
