// ProbeDispatcher: routing by kind, kind prefix on errors, exactly-once callbacks, in_flight,
// unknown kinds, throwing plugins, and destruction dropping pending callbacks.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "probes/dns/dns_message.hpp"
#include "probes/postgres/postgres_probe.hpp"
#include "tests/probes/probe_rig.hpp"

using fo::config::Probe;
using fo::probes::ProbePlugin;
using fo::probes::ProbeResult;
using fo::test::ProbeRig;
using Ms = std::chrono::milliseconds;

namespace {

struct ThrowingPlugin final : ProbePlugin {
  void start(const Probe&, const fo::config::Location&, std::function<void(ProbeResult)>) override {
    throw std::runtime_error("boom");
  }
};

// Calls back twice (a broken plugin): the dispatcher must still call `done` once.
struct TwiceOnLoop final : ProbePlugin {
  explicit TwiceOnLoop(sd_event* e)
      : defer(e, [this] {
          auto d = pending;
          d(ProbeResult::success());
          d(ProbeResult::failure("second"));
        }) {}
  void start(const Probe&, const fo::config::Location&,
             std::function<void(ProbeResult)> done) override {
    pending = std::move(done);
    defer.schedule();
  }
  fo::platform::Defer defer;
  std::function<void(ProbeResult)> pending;
};

}  // namespace

TEST_CASE("dispatcher: the built-in kinds are registered", "[probes][dispatcher]") {
  ProbeRig rig;
  CHECK(rig.dispatcher.kinds() ==
        std::vector<std::string>{"dns", "exec", "http", "postgres", "tcp"});
}

TEST_CASE("dispatcher: unknown kind fails from the loop", "[probes][dispatcher]") {
  ProbeRig rig;
  Probe p;
  p.kind = "smtp";
  CHECK(rig.run(p).error == "smtp: unknown probe kind smtp");
}

TEST_CASE("dispatcher: a throwing plugin becomes a failed check", "[probes][dispatcher]") {
  ProbeRig rig;
  rig.dispatcher.register_plugin("bad", std::make_unique<ThrowingPlugin>());
  Probe p;
  p.kind = "bad";
  CHECK(rig.run(p).error == "bad: internal error: boom");
}

TEST_CASE("dispatcher: a plugin calling back twice reaches done once", "[probes][dispatcher]") {
  ProbeRig rig;
  rig.dispatcher.register_plugin("twice", std::make_unique<TwiceOnLoop>(rig.loop.get()));
  Probe p;
  p.kind = "twice";
  auto r = rig.run(p);  // run() requires exactly one call
  CHECK(r.ok);
}

TEST_CASE("dispatcher: destruction drops pending callbacks", "[probes][dispatcher]") {
  auto loop = fo::platform::make_event();
  fo::platform::CurlMulti curl(loop.get());
  fo::actions::ExecRunner exec(loop.get());
  int calls = 0;
  {
    fo::probes::ProbeDispatcher d(loop.get(), curl, exec);
    Probe tcp;
    tcp.kind = "tcp";
    tcp.tcp.endpoint = {"127.0.0.1", fo::test::unused_port()};
    tcp.tcp.timeout = Ms(200);
    Probe unknown;
    unknown.kind = "nope";
    Probe exec_probe;
    exec_probe.kind = "exec";
    exec_probe.exec.argv = {"/bin/sleep", "5"};
    exec_probe.exec.timeout = Ms(5000);
    for (const Probe* p : {&tcp, &unknown, &exec_probe})
      d.start(*p, {}, [&](ProbeResult) { ++calls; });
    CHECK(d.in_flight() == 3);
  }
  for (int i = 0; i < 20; ++i) sd_event_run(loop.get(), 20 * 1000);
  CHECK(calls == 0);
  CHECK(exec.running() == 0);
}

TEST_CASE("dns messages: rdata candidates", "[probes][dns]") {
  using fo::probes::dns::rdata_candidates;
  CHECK(rdata_candidates("A", {"198.51.100.20"}) == std::vector<std::string>{"198.51.100.20"});
  CHECK(rdata_candidates("MX", {"10", "Mail.Example."}) ==
        std::vector<std::string>{"10", "mail.example", "10 mail.example"});
  CHECK(rdata_candidates("TXT", {"v=spf1 ", "-all"}) ==
        std::vector<std::string>{"v=spf1 ", "-all", "v=spf1 -all"});
}

TEST_CASE("postgres helpers: sizes and libpq errors", "[probes][postgres]") {
  using fo::probes::describe_pq_error;
  using fo::probes::format_bytes;
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(40 * 1024) == "40 kB");
  CHECK(format_bytes(16ull << 20) == "16 MB");
  CHECK(format_bytes(3ull << 29) == "1.5 GB");
  CHECK(describe_pq_error("connection to server at \"127.0.0.1\", port 1 failed: Connection "
                          "refused\n\tIs the server running on that host?\n") ==
        "connection refused");
  CHECK(describe_pq_error("connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  "
                          "database \"x\" does not exist\n") ==
        "FATAL:  database \"x\" does not exist");
}

TEST_CASE("dispatcher: a plugin calling back inside start() is deferred", "[probes][dispatcher]") {
  struct Synchronous final : ProbePlugin {
    void start(const Probe&, const fo::config::Location&,
               std::function<void(ProbeResult)> done) override {
      done(ProbeResult::failure("too eager"));
    }
  };
  ProbeRig rig;
  rig.dispatcher.register_plugin("sync", std::make_unique<Synchronous>());
  Probe p;
  p.kind = "sync";
  CHECK(rig.run(p).error == "sync: too eager");  // run() requires no call inside start()
}
