// Tests of the sd-event primitives: Timer, Defer and the loop clocks.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/platform/event.hpp"
#include "tests/platform/loop_util.hpp"

using fo::platform::Defer;
using fo::platform::make_event;
using fo::platform::Millis;
using fo::platform::Timer;
using fo::test::run_until;

TEST_CASE("Timer: timers fire in deadline order", "[platform][timer]") {
  auto loop = make_event();
  std::vector<int> order;
  Timer late(loop.get(), [&] { order.push_back(30); });
  Timer early(loop.get(), [&] { order.push_back(10); });
  Timer middle(loop.get(), [&] { order.push_back(20); });
  late.arm_in(Millis(30));
  early.arm_in(Millis(10));
  middle.arm_in(Millis(20));
  CHECK(late.armed());
  REQUIRE(run_until(loop.get(), [&] { return order.size() == 3; }));
  CHECK(order == std::vector<int>{10, 20, 30});
  CHECK_FALSE(late.armed());
  CHECK_FALSE(early.armed());
}

namespace {
// Simulates a stalled loop (a long callback, a slow disk): several timers fall due together.
void stall(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}
}  // namespace

TEST_CASE("Timer: timers due in the same iteration still fire in order", "[platform][timer]") {
  auto loop = make_event();
  std::vector<std::string> order;
  std::unique_ptr<Timer> victim;
  Timer late(loop.get(), [&] { order.push_back("30"); });
  Timer middle(loop.get(), [&] { order.push_back("20"); });
  Timer later_armed(loop.get(), [&] { order.push_back("armed in 10"); });
  Timer early(loop.get(), [&] {
    order.push_back("10");
    later_armed.arm_in(Millis(0));  // due now, but only on a later pass
    victim.reset();                 // due in this pass too; must simply not fire
  });
  victim = std::make_unique<Timer>(loop.get(), [&] { order.push_back("victim"); });
  late.arm_in(Millis(3));
  middle.arm_in(Millis(2));
  victim->arm_in(Millis(2));
  early.arm_in(Millis(1));
  stall(Millis(20));
  REQUIRE(run_until(loop.get(), [&] { return order.size() == 4; }));
  CHECK(order == std::vector<std::string>{"10", "20", "30", "armed in 10"});
}

TEST_CASE("Timer: equal deadlines fire in the order they were armed", "[platform][timer]") {
  auto loop = make_event();
  std::vector<int> order;
  Timer a(loop.get(), [&] { order.push_back(1); });
  Timer b(loop.get(), [&] { order.push_back(2); });
  Timer c(loop.get(), [&] { order.push_back(3); });
  Timer start(loop.get(), [&] {
    // Inside a callback the loop's clock stands still: all three get the same deadline.
    c.arm_in(Millis(5));
    a.arm_in(Millis(5));
    b.arm_in(Millis(5));
  });
  start.arm_in(Millis(1));
  REQUIRE(run_until(loop.get(), [&] { return order.size() == 3; }));
  CHECK(order == std::vector<int>{3, 1, 2});
}

TEST_CASE("Timer: re-arm from its own callback", "[platform][timer]") {
  auto loop = make_event();
  int fired = 0;
  bool armed_inside = true;
  std::unique_ptr<Timer> t;
  t = std::make_unique<Timer>(loop.get(), [&] {
    armed_inside = armed_inside && !t->armed();  // one-shot: off while its callback runs
    if (++fired < 5) t->arm_in(Millis(2));
  });
  t->arm_in(Millis(2));
  REQUIRE(run_until(loop.get(), [&] { return fired == 5; }));
  CHECK(armed_inside);
  CHECK_FALSE(t->armed());
  // No sixth firing: the loop keeps turning while a sentinel timer runs out.
  bool sentinel = false;
  Timer s(loop.get(), [&] { sentinel = true; });
  s.arm_in(Millis(20));
  REQUIRE(run_until(loop.get(), [&] { return sentinel; }));
  CHECK(fired == 5);
}

TEST_CASE("Timer: destroy from its own callback", "[platform][timer]") {
  auto loop = make_event();
  int fired = 0;
  std::unique_ptr<Timer> t;
  t = std::make_unique<Timer>(loop.get(), [&] {
    ++fired;
    t.reset();
  });
  t->arm_in(Millis(1));
  REQUIRE(run_until(loop.get(), [&] { return t == nullptr; }));
  bool sentinel = false;
  Timer s(loop.get(), [&] { sentinel = true; });
  s.arm_in(Millis(10));
  REQUIRE(run_until(loop.get(), [&] { return sentinel; }));
  CHECK(fired == 1);
}

TEST_CASE("Timer: disarm and re-arm", "[platform][timer]") {
  auto loop = make_event();
  int a = 0, b = 0;
  Timer ta(loop.get(), [&] { ++a; });
  Timer tb(loop.get(), [&] { ++b; });

  SECTION("disarm prevents firing") {
    ta.arm_in(Millis(5));
    ta.disarm();
    CHECK_FALSE(ta.armed());
    tb.arm_in(Millis(30));
    REQUIRE(run_until(loop.get(), [&] { return b == 1; }));
    CHECK(a == 0);
  }
  SECTION("re-arming replaces the deadline") {
    ta.arm_in(Millis(5));
    ta.arm_in(Millis(60));  // later than tb now
    tb.arm_in(Millis(20));
    REQUIRE(run_until(loop.get(), [&] { return b == 1; }));
    CHECK(a == 0);
    REQUIRE(run_until(loop.get(), [&] { return a == 1; }));
  }
  SECTION("negative delay fires on the next iteration") {
    ta.arm_in(Millis(-5));
    REQUIRE(run_until(
        loop.get(), [&] { return a == 1; }, std::chrono::milliseconds(500)));
  }
}

TEST_CASE("Timer: 1 ms accuracy, not sd-event's 250 ms default slack", "[platform][timer]") {
  auto loop = make_event();
  bool fired = false;
  Timer t(loop.get(), [&] { fired = true; });
  const auto t0 = std::chrono::steady_clock::now();
  t.arm_in(Millis(20));
  REQUIRE(run_until(loop.get(), [&] { return fired; }));
  const double took = fo::test::ms_since(t0);
  CHECK(took >= 19.0);
  CHECK(took < 150.0);
}

TEST_CASE("Timer: the delay counts from arming even after the loop sat idle", "[platform][timer]") {
  auto loop = make_event();
  bool fired = false;
  Timer t(loop.get(), [&] { fired = true; });
  Timer wake(loop.get(), [] {});
  wake.arm_in(Millis(0));
  REQUIRE(run_until(loop.get(), [&] { return !wake.armed(); }));
  // The loop's notion of "now" is the wake-up above; the process then does other work.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto t0 = std::chrono::steady_clock::now();
  t.arm_in(Millis(200));
  REQUIRE(run_until(loop.get(), [&] { return fired; }));
  CHECK(fo::test::ms_since(t0) >= 199.0);
}

TEST_CASE("Defer: runs on a later iteration, not synchronously", "[platform][defer]") {
  auto loop = make_event();
  int runs = 0;
  Defer d(loop.get(), [&] { ++runs; });
  d.schedule();
  d.schedule();  // idempotent while pending
  CHECK(runs == 0);
  CHECK(d.scheduled());
  REQUIRE(run_until(loop.get(), [&] { return runs == 1; }));
  CHECK_FALSE(d.scheduled());
  // Stays off until scheduled again.
  for (int i = 0; i < 5; ++i) sd_event_run(loop.get(), 0);
  CHECK(runs == 1);
  d.schedule();
  d.cancel();
  for (int i = 0; i < 5; ++i) sd_event_run(loop.get(), 0);
  CHECK(runs == 1);
}

TEST_CASE("Defer: may re-schedule and destroy itself", "[platform][defer]") {
  auto loop = make_event();
  int runs = 0;
  std::unique_ptr<Defer> d;
  d = std::make_unique<Defer>(loop.get(), [&] {
    if (++runs < 3)
      d->schedule();
    else
      d.reset();
  });
  d->schedule();
  REQUIRE(run_until(loop.get(), [&] { return d == nullptr; }));
  CHECK(runs == 3);
}

TEST_CASE("Clocks: wall_now and mono_now", "[platform][clock]") {
  auto loop = make_event();
  const auto wall = fo::platform::wall_now(loop.get());
  const auto sys = std::chrono::time_point_cast<Millis>(std::chrono::system_clock::now());
  CHECK(std::chrono::abs(sys - wall) < std::chrono::seconds(5));

  const Millis m0 = fo::platform::mono_now(loop.get());
  bool fired = false;
  Timer t(loop.get(), [&] { fired = true; });
  t.arm_in(Millis(15));
  REQUIRE(run_until(loop.get(), [&] { return fired; }));
  const Millis m1 = fo::platform::mono_now(loop.get());
  CHECK(m1 - m0 >= Millis(14));
  CHECK(m1 - m0 < Millis(5000));
}
