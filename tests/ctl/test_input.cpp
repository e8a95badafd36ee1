// failoverctl input: --since/--until times and the confirmation prompt.
#include <catch2/catch.hpp>
#include <sstream>

#include "ctl/input.hpp"

using namespace fo::ctl;

namespace {
constexpr int64_t kNow = 1796032800000;  // 2026-11-30T10:00:00Z
}

TEST_CASE("times parse as epoch ms, ISO-8601 UTC or relative to now", "[input]") {
  CHECK(parse_time("1796032800000", kNow) == kNow);
  CHECK(parse_time("0", kNow) == 0);
  CHECK(parse_time("2026-11-30T10:00:00Z", kNow) == kNow);
  CHECK(parse_time("2026-11-30t10:00:00z", kNow) == kNow);
  CHECK(parse_time("2026-11-30T10:00:00.250Z", kNow) == kNow + 250);
  CHECK(parse_time("2026-11-30T10:00:00+00:00", kNow) == kNow);
  CHECK(parse_time("2026-11-30", kNow) == kNow - 10 * 3600 * 1000);
  CHECK(parse_time("-2h", kNow) == kNow - 2 * 3600 * 1000);
  CHECK(parse_time("-1h30m", kNow) == kNow - 90 * 60 * 1000);
  CHECK(parse_time("-90s", kNow) == kNow - 90 * 1000);

  CHECK_FALSE(parse_time("", kNow));
  CHECK_FALSE(parse_time("yesterday", kNow));
  CHECK_FALSE(parse_time("-2", kNow));
  CHECK_FALSE(parse_time("-", kNow));
  CHECK_FALSE(parse_time("2026-11-30T10:00:00", kNow));        // no zone
  CHECK_FALSE(parse_time("2026-11-30T10:00:00+01:00", kNow));  // only UTC
  CHECK_FALSE(parse_time("2026-02-30T10:00:00Z", kNow));
  CHECK_FALSE(parse_time("2026-11-30T24:00:00Z", kNow));
  CHECK_FALSE(parse_time("2026-11-30T10:00:00.Z", kNow));
  CHECK_FALSE(parse_time("12345678901234567890", kNow));
  CHECK_FALSE(parse_time(std::string(100, '1'), kNow));
}

TEST_CASE("confirmation asks only a terminal and takes only yes", "[input]") {
  auto ask = [](std::string typed, bool tty, bool yes, std::string* prompt = nullptr) {
    std::istringstream in(typed);
    std::ostringstream out;
    Confirmation c = confirm(in, out, tty, yes);
    if (prompt) *prompt = out.str();
    return c;
  };
  std::string prompt;
  CHECK(ask("y\n", true, false, &prompt) == Confirmation::confirmed);
  CHECK(prompt == "Proceed? [y/N] ");
  CHECK(ask("  YES \n", true, false) == Confirmation::confirmed);
  CHECK(ask("yes", true, false) == Confirmation::confirmed);
  CHECK(ask("\n", true, false) == Confirmation::declined);
  CHECK(ask("n\n", true, false) == Confirmation::declined);
  CHECK(ask("yep\n", true, false) == Confirmation::declined);
  CHECK(ask("", true, false) == Confirmation::declined);  // EOF
  CHECK(ask("no\ny\n", true, false) == Confirmation::declined);
  CHECK(ask(std::string(10000, 'y') + "\n", true, false) == Confirmation::declined);

  CHECK(ask("y\n", false, false, &prompt) == Confirmation::no_terminal);
  CHECK(prompt.empty());
  CHECK(ask("", false, true, &prompt) == Confirmation::confirmed);
  CHECK(ask("n\n", true, true) == Confirmation::confirmed);
}
