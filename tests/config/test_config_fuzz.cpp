// Config loader robustness: thousands of mutated and truncated versions of the example file
// either load or throw ConfigException with well-formed errors; nothing else may happen.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "config_test_util.hpp"
#include "daemon/config/config.hpp"

using fo::config::ConfigException;
using fo::config::parse_config;

namespace {

// Fragments that steer mutations towards interesting parser and validator paths.
const char* const kFragments[] = {
    "[[group]]",
    "[group.policy]",
    "[[group.warm]]",
    "[[location]]",
    "= ",
    "\"",
    "'",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\n",
    "=\"1h\"",
    "= 1e400",
    "= nan",
    "= -1",
    "= 9223372036854775807",
    "\"\\u0000\"",
    "\xff\xfe",
    "kind = \"tcp\"",
    "argv = []",
    "name = \"shop\"",
    "interval = \"0s\"",
    "\"\"\"",
    "#",
    "\r\n",
    "env = { FAILOVER_X = \"1\" }",
    "locations = [\"nope\"]",
    "1979-05-27",
};

std::string mutate(const std::string& base, std::mt19937& rng) {
  std::string s = base;
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n)(rng); };
  int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits && !s.empty(); ++e) {
    std::size_t at = pick(s.size() - 1);
    switch (pick(6)) {
      case 0:  // flip a byte
        s[at] = static_cast<char>(pick(255));
        break;
      case 1:  // delete a span
        s.erase(at, pick(40));
        break;
      case 2:  // insert a fragment
        s.insert(at, kFragments[pick(std::size(kFragments) - 1)]);
        break;
      case 3:  // duplicate a line
      {
        std::size_t begin = s.rfind('\n', at);
        begin = begin == std::string::npos ? 0 : begin + 1;
        std::size_t end = s.find('\n', at);
        end = end == std::string::npos ? s.size() : end + 1;
        s.insert(end, s.substr(begin, end - begin));
        break;
      }
      case 4:  // swap two bytes
        std::swap(s[at], s[pick(s.size() - 1)]);
        break;
      default:  // truncate
        s.resize(at);
        break;
    }
  }
  return s;
}

}  // namespace

TEST_CASE("mutated example files never crash the loader", "[config][fuzz]") {
  const std::string base = fo::config::test::read_file(FO_EXAMPLE_CONFIG);
  REQUIRE(base.size() > 1000);
  std::mt19937 rng(20261130);
  int loaded = 0;
  int rejected = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = mutate(base, rng);
    try {
      auto cfg = parse_config(text, "fuzz.toml");
      CHECK_FALSE(cfg.groups.empty());
      CHECK_FALSE(cfg.locations.empty());
      ++loaded;
    } catch (const ConfigException& e) {
      ++rejected;
      REQUIRE_FALSE(e.errors().empty());
      REQUIRE(e.errors().size() <= 50);
      for (const auto& err : e.errors()) {
        REQUIRE(err.pos.file == "fuzz.toml");
        REQUIRE(err.pos.line >= 1);
        REQUIRE(err.pos.column >= 1);
        REQUIRE_FALSE(err.message.empty());
        // One error per line: messages never carry raw line breaks.
        REQUIRE(err.message.find('\n') == std::string::npos);
      }
    }
  }
  // Both outcomes must occur, or the mutations are not exercising anything.
  CHECK(loaded > 50);
  CHECK(rejected > 1000);
}

TEST_CASE("every prefix of the example file is handled", "[config][fuzz]") {
  const std::string base = fo::config::test::read_file(FO_EXAMPLE_CONFIG);
  for (std::size_t n = 0; n <= base.size(); n += 7) {
    try {
      (void)parse_config(std::string_view(base).substr(0, n), "prefix.toml");
    } catch (const ConfigException& e) {
      REQUIRE_FALSE(e.errors().empty());
    }
  }
}
