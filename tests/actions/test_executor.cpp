// PlanRunner with real exec steps: event order, environment, retries with backoff,
// abort/continue, skipped steps, cancel, and the pure retry_delay() arithmetic.
#include <signal.h>

#include <catch2/catch.hpp>
#include <optional>
#include <set>
#include <vector>

#include "actions/exec/exec_step.hpp"
#include "actions/executor.hpp"
#include "test_support.hpp"

using namespace fo::actions;
using namespace fo::actions::test;
using fo::config::Step;

namespace {

RetryPolicy policy(std::chrono::milliseconds base, std::chrono::milliseconds cap = 30000ms,
                   double jitter = 0.2) {
  RetryPolicy p;
  p.base = base;
  p.cap = cap;
  p.jitter = jitter;
  return p;
}

struct Recorded {
  StepEvent ev;
  std::chrono::steady_clock::time_point at;
};

StepRegistry make_registry(ExecRunner& exec) {
  StepRegistry r;
  r.add("exec", make_exec_step_plugin(exec));
  return r;
}

StepContext context(std::map<std::string, std::string> env = {}) {
  StepContext c;
  c.group = "web";
  c.plan_id = 7;
  c.env = std::move(env);
  return c;
}

PlanOptions options(std::set<std::size_t> done, RetryPolicy retry) {
  PlanOptions o;
  o.already_done = std::move(done);
  o.retry = retry;
  return o;
}

struct PlanFixture {
  std::unique_ptr<sd_event, EventDeleter> loop = new_loop();
  TempDir dir;
  ExecRunner exec{loop.get()};
  StepRegistry registry = make_registry(exec);
  std::vector<Recorded> events;
  std::optional<PlanOutcome> outcome;
  int done_calls = 0;
  std::unique_ptr<PlanRunner> plan;
  std::function<std::string(std::size_t, const std::string&)> intent_begin;
  std::function<std::string(std::size_t, const StepOutcome&)> intent_done;

  Step step(const std::string& name, const std::string& body, int retries = 0,
            bool abort_on_failure = true) {
    Step s;
    s.name = name;
    s.kind = "exec";
    s.argv = {dir.write(name + ".sh", "#!/bin/sh\n" + body)};
    s.timeout = std::chrono::seconds(10);
    s.retries = retries;
    s.abort_on_failure = abort_on_failure;
    return s;
  }

  void make(
      std::vector<Step> steps, std::map<std::string, std::string> ctx = {},
      std::set<std::size_t> done = {}, RetryPolicy retry = policy(10ms),
      std::function<double()> random01 = [] { return 0.5; }) {
    PlanHooks hooks;
    hooks.on_step = [this](const StepEvent& ev) {
      events.push_back({ev, std::chrono::steady_clock::now()});
    };
    hooks.on_done = [this](PlanOutcome o) {
      ++done_calls;
      outcome = std::move(o);
    };
    hooks.intent_begin = intent_begin;
    hooks.intent_done = intent_done;
    plan = std::make_unique<PlanRunner>(loop.get(), registry, std::move(steps),
                                        context(std::move(ctx)), options(std::move(done), retry),
                                        std::move(hooks), std::move(random01));
  }

  bool run_to_end(std::chrono::milliseconds limit = 20s) {
    plan->start();
    REQUIRE(done_calls == 0);  // never from inside start()
    REQUIRE(events.empty());
    bool ok = run_until(
        loop.get(), [&] { return done_calls > 0; }, limit);
    run_for(loop.get(), 20ms);
    REQUIRE(done_calls <= 1);
    return ok;
  }

  // "0:start:1", "0:ok:1", ... compact trace of the events.
  std::vector<std::string> trace() const {
    std::vector<std::string> out;
    for (const auto& r : events) {
      out.push_back(std::to_string(r.ev.index) + ":" + (r.ev.finished ? r.ev.result : "start") +
                    ":" + std::to_string(r.ev.attempt));
    }
    return out;
  }
};

using Trace = std::vector<std::string>;

}  // namespace

TEST_CASE("retry_delay: exponential, capped, with symmetric jitter", "[plan]") {
  RetryPolicy p = policy(10ms, 100ms, 0.2);
  CHECK(retry_delay(p, 1, 0.5) == 10ms);
  CHECK(retry_delay(p, 2, 0.5) == 20ms);
  CHECK(retry_delay(p, 3, 0.5) == 40ms);
  CHECK(retry_delay(p, 4, 0.5) == 80ms);
  CHECK(retry_delay(p, 5, 0.5) == 100ms);
  CHECK(retry_delay(p, 1000, 0.5) == 100ms);
  CHECK(retry_delay(p, 1, 1.0) == 12ms);
  CHECK(retry_delay(p, 1, 0.0) == 8ms);
  CHECK(retry_delay(p, 5, 1.0) == 120ms);
  CHECK(retry_delay(policy(1000ms, 30000ms, 0.0), 3, 0.9) == 4000ms);
}

TEST_CASE("plan: three ok steps report start and finish events in order", "[plan]") {
  PlanFixture f;
  f.make({f.step("a", "echo A\n"), f.step("b", "echo B\n"), f.step("c", "echo C\n")});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK(f.outcome->ok);
  CHECK(f.outcome->detail == "all 3 steps ok");
  CHECK(f.trace() == Trace{"0:start:1", "0:ok:1", "1:start:1", "1:ok:1", "2:start:1", "2:ok:1"});
  CHECK(f.events[0].ev.result == "running");
  CHECK(f.events[1].ev.name == "a");
  CHECK(f.events[1].ev.kind == "exec");
  CHECK(f.events[1].ev.output == "A\n");
  CHECK(f.events[1].ev.exit_code == 0);
  CHECK(f.events[1].ev.detail == "exited 0");
  CHECK(f.events[5].ev.output == "C\n");
  CHECK_FALSE(f.plan->running());
}

TEST_CASE("plan: context env reaches each step and FAILOVER_* cannot be overridden", "[plan]") {
  PlanFixture f;
  Step s;
  s.name = "env";
  s.kind = "exec";
  s.argv = {"/usr/bin/env"};
  s.env = {{"FAILOVER_GROUP", "evil"}, {"FAILOVER_EXTRA", "x"}, {"MY_SETTING", "1"}};
  f.make({s}, {{"FAILOVER_GROUP", "web"}, {"FAILOVER_PHASE", "failover"}});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK(f.outcome->ok);
  REQUIRE(f.events.size() == 2);
  CHECK(f.events[1].ev.output == std::string("FAILOVER_GROUP=web\n") +
                                     "FAILOVER_IDEMPOTENCY_KEY=web/7/0\n" +
                                     "FAILOVER_PHASE=failover\nFAILOVER_STEP=env\n" +
                                     "MY_SETTING=1\nPATH=" + kChildPath + "\n");
}

TEST_CASE("plan: a failing attempt is retried with backoff until it succeeds", "[plan]") {
  PlanFixture f;
  const auto counter = f.dir.file("count");
  // Fails twice, succeeds on the third attempt.
  auto flaky = f.step("flaky",
                      "n=$(cat " + counter + " 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > " +
                          counter + "\n[ $n -ge 3 ] || exit 3\n",
                      5);
  f.make({flaky}, {}, {}, policy(10ms, 1000ms, 0.2), [] { return 1.0; });
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK(f.outcome->ok);
  CHECK(f.trace() ==
        Trace{"0:start:1", "0:failed:1", "0:start:2", "0:failed:2", "0:start:3", "0:ok:3"});
  CHECK(f.events[1].ev.exit_code == 3);
  CHECK(f.events[1].ev.detail == "exited 3");
  CHECK(read_file(counter) == "3\n");
  // random01 = 1.0 -> factor 1.2: 12 ms after attempt 1, 24 ms after attempt 2.
  CHECK(f.events[2].at - f.events[1].at >= 12ms);
  CHECK(f.events[4].at - f.events[3].at >= 24ms);
}

TEST_CASE("plan: retries exhausted on an aborting step fail the plan", "[plan]") {
  PlanFixture f;
  const auto marker = f.dir.file("third-ran");
  f.make({f.step("first", "exit 0\n"), f.step("second", "exit 3\n", 1),
          f.step("third", "touch " + marker + "\n")});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK_FALSE(f.outcome->ok);
  CHECK(f.outcome->detail == "step 2 (second) failed: exited 3 after 2 attempts");
  CHECK(f.trace() ==
        Trace{"0:start:1", "0:ok:1", "1:start:1", "1:failed:1", "1:start:2", "1:failed:2"});
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("plan: a failing continue step does not stop the plan", "[plan]") {
  PlanFixture f;
  const auto marker = f.dir.file("third-ran");
  f.make({f.step("first", "exit 0\n"), f.step("second", "exit 4\n", 0, false),
          f.step("third", "touch " + marker + "\n")});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK(f.outcome->ok);
  CHECK(f.outcome->detail ==
        "2 of 3 steps ok; continued past: step 2 (second) failed: exited 4 after 1 attempt");
  CHECK(f.trace() ==
        Trace{"0:start:1", "0:ok:1", "1:start:1", "1:failed:1", "2:start:1", "2:ok:1"});
  CHECK(std::filesystem::exists(marker));
}

TEST_CASE("plan: an aborting failure after a continued one names both", "[plan]") {
  PlanFixture f;
  f.make({f.step("soft", "exit 1\n", 0, false), f.step("hard", "exit 2\n")});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK_FALSE(f.outcome->ok);
  CHECK(f.outcome->detail ==
        "step 2 (hard) failed: exited 2 after 1 attempt (earlier, continued past: 1 failure)");
}

TEST_CASE("plan: steps already done before a restart are skipped", "[plan]") {
  PlanFixture f;
  const auto marker = f.dir.file("first-ran");
  f.make({f.step("first", "touch " + marker + "\n"), f.step("second", "exit 0\n"),
          f.step("third", "exit 0\n")},
         {}, {0, 1});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK(f.outcome->ok);
  CHECK(f.outcome->detail == "all 3 steps ok (2 already done)");
  CHECK(f.trace() == Trace{"0:skipped:0", "1:skipped:0", "2:start:1", "2:ok:1"});
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("plan: a step that times out reports timeout", "[plan]") {
  PlanFixture f;
  auto slow = f.step("slow", "exec /usr/bin/sleep 30\n");
  slow.timeout = 200ms;
  f.make({slow});
  REQUIRE(f.run_to_end(10s));
  REQUIRE(f.outcome);
  CHECK_FALSE(f.outcome->ok);
  CHECK(f.outcome->detail == "step 1 (slow) failed: timed out after 200ms after 1 attempt");
  REQUIRE(f.events.size() == 2);
  CHECK(f.events[1].ev.result == "timeout");
}

TEST_CASE("plan: an unknown step kind fails with a clear message", "[plan]") {
  PlanFixture f;
  Step s;
  s.name = "dns#0";
  s.kind = "dns";
  s.retries = 3;
  f.make({s});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK_FALSE(f.outcome->ok);
  CHECK(f.outcome->changed_nothing);  // found in the pre-check stage
  CHECK(f.outcome->detail == "pre-check of step 1 (dns#0) failed: unknown step kind 'dns'");
  REQUIRE(f.trace() == Trace{"0:failed:1"});
  CHECK(f.events[0].ev.detail == "unknown step kind 'dns'");
}

TEST_CASE("plan: a refused executable fails the step with the reason", "[plan]") {
  PlanFixture f;
  Step s;
  s.name = "rel";
  s.kind = "exec";
  s.argv = {"relative/path"};
  f.make({s});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK_FALSE(f.outcome->ok);
  CHECK(f.outcome->detail ==
        "step 1 (rel) failed: refused: relative/path is not an absolute path after 1 attempt");
}

TEST_CASE("plan: an empty plan completes on the loop", "[plan]") {
  PlanFixture f;
  f.make({});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK(f.outcome->ok);
  CHECK(f.outcome->detail == "no steps");
  CHECK(f.events.empty());
}

TEST_CASE("plan: cancel mid-plan kills the running step and stops all callbacks", "[plan]") {
  PlanFixture f;
  const auto pid_file = f.dir.file("pid");
  const auto marker = f.dir.file("third-ran");
  f.make({f.step("first", "exit 0\n"),
          f.step("second", "echo $$ > " + pid_file + "\nexec /usr/bin/sleep 30\n"),
          f.step("third", "touch " + marker + "\n")});
  f.plan->start();
  const pid_t pid = wait_for_pid_file(f.loop.get(), pid_file, 10s);
  REQUIRE(pid > 0);
  CHECK(f.plan->running());
  f.plan->cancel();
  CHECK_FALSE(f.plan->running());
  CHECK(run_until(
      f.loop.get(), [&] { return !pid_exists(pid); }, 5s));
  run_for(f.loop.get(), 50ms);
  CHECK(f.done_calls == 0);
  CHECK(f.trace() == Trace{"0:start:1", "0:ok:1", "1:start:1"});
  CHECK_FALSE(std::filesystem::exists(marker));
  CHECK(f.exec.running() == 0);
}

TEST_CASE("plan: cancel during a retry delay stops the retry", "[plan]") {
  PlanFixture f;
  f.make({f.step("fail", "exit 1\n", 3)}, {}, {}, policy(10000ms));
  f.plan->start();
  REQUIRE(run_until(
      f.loop.get(), [&] { return f.events.size() == 2; }, 10s));
  f.plan->cancel();
  run_for(f.loop.get(), 50ms);
  CHECK(f.trace() == Trace{"0:start:1", "0:failed:1"});
  CHECK(f.done_calls == 0);
}

TEST_CASE("plan: callbacks may destroy the runner", "[plan]") {
  PlanFixture f;
  SECTION("from on_done") {
    bool done = false;
    PlanHooks hooks;
    hooks.on_step = [](const StepEvent&) {};
    hooks.on_done = [&](PlanOutcome o) {
      CHECK(o.ok);
      done = true;
      f.plan.reset();
    };
    f.plan = std::make_unique<PlanRunner>(f.loop.get(), f.registry,
                                          std::vector<Step>{f.step("a", "exit 0\n")}, context(),
                                          PlanOptions{}, std::move(hooks));
    f.plan->start();
    REQUIRE(run_until(
        f.loop.get(), [&] { return done; }, 10s));
    CHECK_FALSE(f.plan);
  }
  SECTION("from on_step, while a step is starting") {
    int events = 0;
    PlanHooks hooks;
    hooks.on_step = [&](const StepEvent&) {
      ++events;
      f.plan.reset();
    };
    hooks.on_done = [&](PlanOutcome) { FAIL("on_done after destruction"); };
    f.plan = std::make_unique<PlanRunner>(
        f.loop.get(), f.registry,
        std::vector<Step>{f.step("a", "exit 0\n"), f.step("b", "exit 0\n")}, context(),
        PlanOptions{}, std::move(hooks));
    f.plan->start();
    REQUIRE(run_until(
        f.loop.get(), [&] { return !f.plan; }, 10s));
    run_for(f.loop.get(), 50ms);
    CHECK(events == 1);
    CHECK(f.exec.running() == 0);
  }
}

namespace {

// A step kind for these tests whose pre-check runs a real script (env CHECK_SCRIPT) and whose
// apply runs the step's argv like exec.
class GatedPlugin : public StepPlugin {
 public:
  explicit GatedPlugin(ExecRunner& exec) : exec_(exec), inner_(make_exec_step_plugin(exec)) {}
  std::unique_ptr<StepAttempt> apply(const Step& step, const StepContext& ctx,
                                     StepDone done) override {
    return inner_->apply(step, ctx, std::move(done));
  }
  std::unique_ptr<StepAttempt> check(const Step& step, const StepContext& ctx,
                                     StepDone done) override {
    auto it = step.env.find("CHECK_SCRIPT");
    if (it == step.env.end()) return nullptr;
    Step probe = step;
    probe.argv = {it->second};
    return inner_->apply(probe, ctx, std::move(done));
  }
  // Observation runs env OBSERVE_SCRIPT: exit 0 = in place, anything else = drift.
  std::unique_ptr<StepAttempt> observe(const Step& step, const StepContext& ctx,
                                       StepDone done) override {
    auto it = step.env.find("OBSERVE_SCRIPT");
    if (it == step.env.end()) return nullptr;
    Step probe = step;
    probe.argv = {it->second};
    return inner_->apply(probe, ctx, std::move(done));
  }

 private:
  ExecRunner& exec_;
  std::unique_ptr<StepPlugin> inner_;
};

// Starts and never finishes: only the executor's deadline can end its attempts.
class SilentPlugin : public StepPlugin {
 public:
  std::unique_ptr<StepAttempt> apply(const Step&, const StepContext&, StepDone) override {
    ++started;
    return std::make_unique<StepAttempt>();
  }
  int started = 0;
};

}  // namespace

TEST_CASE("plan: a failed pre-check stops the plan before anything changes", "[plan]") {
  PlanFixture f;
  f.registry.add("gated", std::make_unique<GatedPlugin>(f.exec));
  const auto marker = f.dir.file("changed");
  auto first = f.step("first", "touch " + marker + "\n");
  auto gate = f.step("gate", "exit 0\n");
  gate.kind = "gated";
  gate.env["CHECK_SCRIPT"] = f.dir.write("check.sh", "#!/bin/sh\necho lag too high\nexit 1\n");
  f.make({first, gate});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK_FALSE(f.outcome->ok);
  CHECK(f.outcome->changed_nothing);
  CHECK(f.outcome->detail == "pre-check of step 2 (gate) failed: exited 1");
  CHECK(f.trace() == Trace{"1:start:1", "1:failed:1"});
  CHECK(f.events[0].ev.stage == "check");
  CHECK(f.events[1].ev.output == "lag too high\n");
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("plan: pre-checks pass, then every step is applied", "[plan]") {
  PlanFixture f;
  f.registry.add("gated", std::make_unique<GatedPlugin>(f.exec));
  auto gate = f.step("gate", "echo applied\n");
  gate.kind = "gated";
  gate.env["CHECK_SCRIPT"] = f.dir.write("check.sh", "#!/bin/sh\nexit 0\n");
  f.make({f.step("first", "exit 0\n"), gate});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK(f.outcome->ok);
  CHECK_FALSE(f.outcome->changed_nothing);
  CHECK(f.trace() == Trace{"1:start:1", "1:ok:1", "0:start:1", "0:ok:1", "1:start:1", "1:ok:1"});
  CHECK(f.events[1].ev.stage == "check");
  CHECK(f.events[2].ev.stage == "apply");
}

namespace {

// Runs `steps` with `o` to the end and returns the outcome; events go to f.events.
PlanOutcome run_with(PlanFixture& f, std::vector<Step> steps, PlanOptions o) {
  PlanHooks hooks;
  hooks.on_step = [&f](const StepEvent& ev) { f.events.push_back({ev, {}}); };
  hooks.on_done = [&f](PlanOutcome out) {
    ++f.done_calls;
    f.outcome = std::move(out);
  };
  f.plan = std::make_unique<PlanRunner>(f.loop.get(), f.registry, std::move(steps), context(),
                                        std::move(o), std::move(hooks));
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  return *f.outcome;
}

}  // namespace

TEST_CASE("plan: a dry run runs the pre-checks only", "[plan]") {
  PlanFixture f;
  f.registry.add("gated", std::make_unique<GatedPlugin>(f.exec));
  const auto marker = f.dir.file("changed");
  auto gate = f.step("gate", "touch " + marker + "\n");
  gate.kind = "gated";
  gate.env["CHECK_SCRIPT"] = f.dir.write("check.sh", "#!/bin/sh\nexit 0\n");
  PlanOptions o;
  o.mode = PlanMode::dry_run;
  run_with(f, {gate, f.step("b", "touch " + marker)}, o);
  CHECK(f.outcome->ok);
  CHECK(f.outcome->changed_nothing);
  CHECK(f.outcome->detail == "1 pre-check passed; gate: exited 0");
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("plan: a resumed plan skips the pre-checks", "[plan]") {
  PlanFixture f;
  f.registry.add("gated", std::make_unique<GatedPlugin>(f.exec));
  auto gate = f.step("gate", "exit 0\n");
  gate.kind = "gated";
  gate.env["CHECK_SCRIPT"] = f.dir.write("check.sh", "#!/bin/sh\nexit 1\n");
  PlanOptions o;
  o.prechecks = false;
  o.already_done = {0};
  run_with(f, {f.step("a", "exit 1\n"), gate}, o);
  CHECK(f.outcome->ok);
  CHECK(f.trace() == Trace{"0:skipped:0", "1:start:1", "1:ok:1"});
}

TEST_CASE("plan: a failure a retry cannot fix is not retried", "[plan]") {
  PlanFixture f;
  Step s;
  s.name = "rel";
  s.kind = "exec";
  s.argv = {"relative/path"};
  s.retries = 5;
  f.make({s});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK_FALSE(f.outcome->ok);
  CHECK(f.trace() == Trace{"0:start:1", "0:failed:1"});
  CHECK(f.outcome->detail ==
        "step 1 (rel) failed: refused: relative/path is not an absolute path after 1 attempt "
        "(not retried: a retry cannot help)");
}

TEST_CASE("plan: the intent log brackets every step", "[plan]") {
  PlanFixture f;
  std::vector<std::string> log;
  f.intent_begin = [&](std::size_t i, const std::string& key) {
    log.push_back("begin " + std::to_string(i) + " " + key);
    return std::string();
  };
  f.intent_done = [&](std::size_t i, const StepOutcome& o) {
    log.push_back("done " + std::to_string(i) + " " + (o.ok() ? "ok" : "?"));
    return std::string();
  };
  f.make({f.step("a", "exit 0\n"), f.step("b", "exit 1\n", 1, false), f.step("c", "exit 0\n")});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK(f.outcome->ok);
  // b failed twice (one retry): begun once, never marked done.
  CHECK(log == std::vector<std::string>{"begin 0 web/7/0", "done 0 ok", "begin 1 web/7/1",
                                        "begin 2 web/7/2", "done 2 ok"});
}

TEST_CASE("plan: a step whose intent cannot be recorded is not started", "[plan]") {
  PlanFixture f;
  const auto marker = f.dir.file("ran");
  f.intent_begin = [&](std::size_t i, const std::string&) {
    return i == 1 ? std::string("disk I/O error") : std::string();
  };
  f.make({f.step("a", "exit 0\n"), f.step("b", "touch " + marker + "\n")});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK_FALSE(f.outcome->ok);
  CHECK(f.outcome->detail == "step 2 (b) not started: cannot record intent: disk I/O error");
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("plan: the step deadline ends an attempt that never reports", "[plan]") {
  PlanFixture f;
  auto silent = std::make_unique<SilentPlugin>();
  SilentPlugin* plugin = silent.get();
  f.registry.add("silent", std::move(silent));
  Step s;
  s.name = "mute";
  s.kind = "silent";
  s.timeout = 50ms;
  s.retries = 1;
  f.make({s});
  REQUIRE(f.run_to_end(20s));
  REQUIRE(f.outcome);
  CHECK_FALSE(f.outcome->ok);
  CHECK(plugin->started == 2);
  CHECK(f.trace() == Trace{"0:start:1", "0:timeout:1", "0:start:2", "0:timeout:2"});
  CHECK(f.events[1].ev.detail == "no result within 50ms (step timeout)");
}

TEST_CASE("plan: a step with precheck = false skips the pre-check stage", "[plan]") {
  PlanFixture f;
  f.registry.add("gated", std::make_unique<GatedPlugin>(f.exec));
  auto gate = f.step("promote", "exit 0\n");
  gate.kind = "gated";
  gate.precheck = false;  // an earlier step (the rewind) makes its precondition true
  gate.env["CHECK_SCRIPT"] = f.dir.write("check.sh", "#!/bin/sh\nexit 1\n");
  f.make({f.step("rewind", "exit 0\n"), gate});
  REQUIRE(f.run_to_end());
  REQUIRE(f.outcome);
  CHECK(f.outcome->ok);
  CHECK(f.trace() == Trace{"0:start:1", "0:ok:1", "1:start:1", "1:ok:1"});
}

TEST_CASE("plan: an observation names the drifting steps and changes nothing", "[plan]") {
  PlanFixture f;
  f.registry.add("gated", std::make_unique<GatedPlugin>(f.exec));
  const auto marker = f.dir.file("changed");
  auto in_place = f.step("in-place", "touch " + marker + "\n");
  in_place.kind = "gated";
  in_place.env["OBSERVE_SCRIPT"] = f.dir.write("ok.sh", "#!/bin/sh\nexit 0\n");
  auto drifted = f.step("drifted", "touch " + marker + "\n");
  drifted.kind = "gated";
  drifted.env["OBSERVE_SCRIPT"] =
      f.dir.write("drift.sh", "#!/bin/sh\necho points elsewhere\nexit 1\n");
  PlanOptions o;
  o.mode = PlanMode::observe;
  // The exec step cannot observe its effect: it is neither observed nor drift.
  PlanOutcome out = run_with(f, {in_place, f.step("exec", "touch " + marker + "\n"), drifted}, o);
  CHECK_FALSE(out.ok);
  CHECK(out.changed_nothing);
  CHECK(out.observed == 2);
  CHECK(out.drift_steps == std::vector<std::size_t>{2});
  REQUIRE(out.drift.size() == 1);
  CHECK(out.drift[0] == "drifted: exited 1");
  CHECK(f.events.front().ev.stage == "observe");
  CHECK_FALSE(std::filesystem::exists(marker));

  SECTION("and reports no drift when every effect is in place") {
    f.events.clear();
    f.done_calls = 0;
    f.outcome.reset();
    PlanOutcome clean = run_with(f, {in_place, f.step("exec", "exit 0\n")}, o);
    CHECK(clean.ok);
    CHECK(clean.drift_steps.empty());
    CHECK(clean.detail == "no drift (1 step observed)");
  }
}

TEST_CASE("plan: a repair runs only the steps that drifted", "[plan]") {
  PlanFixture f;
  f.registry.add("gated", std::make_unique<GatedPlugin>(f.exec));
  const auto rewound = f.dir.file("rewound");
  const auto repaired = f.dir.file("repaired");
  // Step 0's pre-check would fail and step 1 must not run again: neither is part of the repair.
  auto promote = f.step("promote", "exit 0\n");
  promote.kind = "gated";
  promote.env["CHECK_SCRIPT"] = f.dir.write("refuse.sh", "#!/bin/sh\nexit 1\n");
  auto record = f.step("record", "touch " + repaired + "\n");
  record.kind = "gated";
  record.env["CHECK_SCRIPT"] = f.dir.write("pass.sh", "#!/bin/sh\nexit 0\n");
  PlanOptions o;
  o.only = std::set<std::size_t>{2};
  PlanOutcome out = run_with(f, {promote, f.step("rewind", "touch " + rewound + "\n"), record}, o);
  CHECK(out.ok);
  CHECK(f.trace() ==
        Trace{"2:start:1", "2:ok:1", "0:skipped:0", "1:skipped:0", "2:start:1", "2:ok:1"});
  CHECK(f.events[0].ev.stage == "check");
  CHECK(f.events[2].ev.detail == "in place (not part of the repair)");
  CHECK(std::filesystem::exists(repaired));
  CHECK_FALSE(std::filesystem::exists(rewound));
}
