// Tests of sd_notify/watchdog (against a NOTIFY_SOCKET the test owns), journald events without
// journald, logging set-up and the loop's signal mask.
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/platform/event.hpp"
#include "daemon/platform/journal.hpp"
#include "daemon/platform/notify.hpp"
#include "daemon/platform/signals.hpp"
#include "tests/platform/loop_util.hpp"

using fo::platform::make_event;
using fo::test::run_until;

namespace {

// An AF_UNIX datagram socket in a fresh temp dir, exported as NOTIFY_SOCKET for its lifetime.
class NotifySocket {
 public:
  NotifySocket() {
    char tmpl[] = "/tmp/fo-notify-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/notify.sock";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path_.c_str(), sizeof a.sun_path - 1);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    ::setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~NotifySocket() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  // Next datagram, or "" if none is queued.
  std::string receive() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }

 private:
  std::string dir_, path_;
  int fd_ = -1;
};

}  // namespace

TEST_CASE("notify: READY, STATUS and STOPPING reach NOTIFY_SOCKET", "[platform][notify]") {
  NotifySocket sock;
  CHECK(fo::platform::notify_ready("probing 2 groups") > 0);
  CHECK(sock.receive() == "READY=1\nSTATUS=probing 2 groups");
  CHECK(fo::platform::notify_status("holding: primary 6/6 healthy") > 0);
  CHECK(sock.receive() == "STATUS=holding: primary 6/6 healthy");
  CHECK(fo::platform::notify_stopping() > 0);
  CHECK(sock.receive() == "STOPPING=1");
  CHECK(fo::platform::notify("RELOADING=1") > 0);
  CHECK(sock.receive() == "RELOADING=1");
  CHECK(sock.receive().empty());
}

TEST_CASE("notify: a status cannot inject other fields", "[platform][notify]") {
  NotifySocket sock;
  CHECK(fo::platform::notify_status("bad\nREADY=1") > 0);
  CHECK(sock.receive() == "STATUS=bad READY=1");
  CHECK(fo::platform::one_line(std::string(5000, 'a')).size() == 1024);
}

TEST_CASE("notify: without NOTIFY_SOCKET nothing is sent and 0 returned", "[platform][notify]") {
  ::unsetenv("NOTIFY_SOCKET");
  CHECK(fo::platform::notify_ready("x") == 0);
  CHECK(fo::platform::notify_stopping() == 0);
}

TEST_CASE("watchdog: WATCHDOG_USEC makes the loop send WATCHDOG=1", "[platform][notify]") {
  NotifySocket sock;
  ::unsetenv("WATCHDOG_PID");

  SECTION("enabled: pings while the loop turns") {
    ::setenv("WATCHDOG_USEC", "200000", 1);  // 200 ms
    auto loop = make_event();
    REQUIRE(fo::platform::enable_watchdog(loop.get()));
    int pings = 0;
    bool other = false;
    auto drain = [&] {
      for (std::string m = sock.receive(); !m.empty(); m = sock.receive()) {
        if (m == "WATCHDOG=1")
          ++pings;
        else
          other = true;
      }
      return pings >= 3;
    };
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(run_until(loop.get(), drain, std::chrono::seconds(5)));
    CHECK_FALSE(other);
    // Not a burst: sd-event pings on a wake-up at least WATCHDOG_USEC/4 after the last ping.
    CHECK(fo::test::ms_since(t0) >= 90.0);
  }
  SECTION("WATCHDOG_PID of another process: disabled") {
    ::setenv("WATCHDOG_USEC", "200000", 1);
    ::setenv("WATCHDOG_PID", "1", 1);
    auto loop = make_event();
    CHECK_FALSE(fo::platform::enable_watchdog(loop.get()));
    ::unsetenv("WATCHDOG_PID");
  }
  SECTION("WATCHDOG_PID of this process: enabled") {
    ::setenv("WATCHDOG_USEC", "200000", 1);
    ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
    auto loop = make_event();
    CHECK(fo::platform::enable_watchdog(loop.get()));
    ::unsetenv("WATCHDOG_PID");
  }
  SECTION("no WATCHDOG_USEC: disabled, nothing sent") {
    ::unsetenv("WATCHDOG_USEC");
    auto loop = make_event();
    CHECK_FALSE(fo::platform::enable_watchdog(loop.get()));
    for (int i = 0; i < 5; ++i) sd_event_run(loop.get(), 1000);
    CHECK(sock.receive().empty());
  }
  ::unsetenv("WATCHDOG_USEC");
}

TEST_CASE("journal: events without journald return without crashing", "[platform][journal]") {
  using fo::platform::JournalField;
  const auto t0 = std::chrono::steady_clock::now();
  fo::platform::journal_event("f0a1b2c3d4e5f60718293a4b5c6d7e8f", 5, "failover primary->secondary",
                              {{"GROUP", "web"}, {"FROM", "primary"}, {"TO", "secondary"}});
  fo::platform::journal_event("not-an-id", 99, std::string(100000, 'm'),
                              {{"bad name", "x"}, {"_PID", "1"}, {"MULTI", "line\nvalue"}});
  CHECK(fo::test::ms_since(t0) < 2000.0);
}

TEST_CASE("journal: entry fields are validated and limited", "[platform][journal]") {
  using fo::platform::journal_entry;
  using fo::platform::JournalField;
  auto e = journal_entry("F0A1B2C3D4E5F60718293A4B5C6D7E8F", 4, "hello",
                         {{"GROUP", "web"},
                          {"to", "x"},
                          {"_PID", "1"},
                          {"9X", "y"},
                          {"MESSAGE", "spoof"},
                          {"REASON", "3/3 locations failed"}});
  CHECK(e == std::vector<std::string>{"MESSAGE_ID=F0A1B2C3D4E5F60718293A4B5C6D7E8F", "PRIORITY=4",
                                      "MESSAGE=hello", "SYSLOG_IDENTIFIER=failoverd", "GROUP=web",
                                      "REASON=3/3 locations failed"});
  auto bad_id = journal_entry("xyz", -3, "m", {});
  CHECK(bad_id ==
        std::vector<std::string>{"PRIORITY=0", "MESSAGE=m", "SYSLOG_IDENTIFIER=failoverd"});
  std::vector<JournalField> many(100, JournalField{"F", "v"});
  CHECK(journal_entry("", 6, "m", many).size() == 3 + 64);
  CHECK(fo::platform::valid_journal_field_name("FAILOVER_TO"));
  CHECK_FALSE(fo::platform::valid_journal_field_name(""));
  CHECK_FALSE(fo::platform::valid_journal_field_name(std::string(65, 'A')));
}

TEST_CASE("logging: levels are parsed, unknown ones rejected", "[platform][logging]") {
  fo::platform::setup_logging("debug");
  CHECK(spdlog::default_logger()->name() == "failoverd");
  CHECK(spdlog::default_logger()->level() == spdlog::level::debug);
  fo::platform::setup_logging("warn");
  CHECK(spdlog::default_logger()->level() == spdlog::level::warn);
  CHECK_THROWS_AS(fo::platform::setup_logging("verbose"), std::invalid_argument);
  CHECK(spdlog::default_logger()->level() == spdlog::level::warn);
  spdlog::info("not shown at warn");
}

TEST_CASE("signals: loop signals are blocked and reach an sd-event signal source",
          "[platform][signals]") {
  fo::platform::block_signals_for_loop();
  sigset_t current;
  REQUIRE(pthread_sigmask(SIG_BLOCK, nullptr, &current) == 0);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) CHECK(sigismember(&current, sig) == 1);

  auto loop = make_event();
  int got = 0;
  sd_event_source* raw = nullptr;
  REQUIRE(sd_event_add_signal(
              loop.get(), &raw, SIGHUP,
              [](sd_event_source*, const signalfd_siginfo* si, void* ud) {
                *static_cast<int*>(ud) = static_cast<int>(si->ssi_signo);
                return 0;
              },
              &got) >= 0);
  fo::platform::SourcePtr src(raw);
  REQUIRE(::kill(::getpid(), SIGHUP) ==
          0);  // blocked, so it waits in the signalfd, no default action
  REQUIRE(run_until(
      loop.get(), [&] { return got != 0; }, std::chrono::seconds(5)));
  CHECK(got == SIGHUP);
}
