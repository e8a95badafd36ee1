// The CSV timeline reader: columns found by header name, tolerated variations, and every bad
// row reported with its line.
#include <catch2/catch.hpp>

#include "sim_test_util.hpp"

using namespace fo::sim;
using namespace fo::sim::test;
using fo::core::Instant;
using fo::core::Millis;
using fo::core::Site;

namespace {

struct Row {
  size_t line;
  int64_t ms;
  std::string group;
  Site site;
  std::string location;
  bool ok;
  bool operator==(const Row&) const = default;
};

std::vector<Row> parse(const std::string& text) {
  std::vector<Row> rows;
  read_timeline_text(text, "t.csv", [&](const TimelineRow& r) {
    rows.push_back({r.line, fo::core::to_ms(r.at), std::string(r.group), r.site,
                    std::string(r.location), r.ok});
    return std::string();
  });
  return rows;
}

// The message of the TimelineError the text raises, or "" if it parses.
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const TimelineError& e) {
    return e.what();
  }
  return "";
}

const std::string kHeader = "t,group,site,location,ok\n";

}  // namespace

TEST_CASE("timeline: columns are found by header name in any order") {
  auto rows = parse("ok,location,site,group,t\n1,ams,primary,shop,0\n0,fra,secondary,api,10\n");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == Row{2, 0, "shop", Site::primary, "ams", true});
  CHECK(rows[1] == Row{3, 10000, "api", Site::secondary, "fra", false});
}

TEST_CASE("timeline: extra columns are ignored, also quoted ones holding commas") {
  auto rows = parse(
      "latency_ms,t,note,group,site,location,ok,region\n"
      "120,5,\"slow, but fine\",shop,primary,ams,1,eu\n"
      "5000,6,\"said \"\"no\"\"\",shop,primary,ams,0,eu\n");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == Row{2, 5000, "shop", Site::primary, "ams", true});
  CHECK(rows[1] == Row{3, 6000, "shop", Site::primary, "ams", false});
}

TEST_CASE("timeline: decimal seconds are rounded to the millisecond") {
  auto rows =
      parse(kHeader + "0.5,shop,primary,ams,1\n12.3456,shop,primary,ams,1\n1e2,s,primary,a,0\n");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].ms == 500);
  CHECK(rows[1].ms == 12346);
  CHECK(rows[2].ms == 100000);
}

TEST_CASE("timeline: CRLF line endings, a byte order mark, blanks and spaces are accepted") {
  auto rows = parse(
      "\xEF\xBB\xBFt,group,site,location,ok\r\n 1 , shop ,primary,ams, 1\r\n\r\n"
      "2,shop,primary,ams,0\r\n3,shop,primary,ams,1");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] == Row{2, 1000, "shop", Site::primary, "ams", true});
  CHECK(rows[1] == Row{4, 2000, "shop", Site::primary, "ams", false});  // line 3 is blank
  CHECK(rows[2] == Row{5, 3000, "shop", Site::primary, "ams", true});   // no final newline
}

TEST_CASE("timeline: each bad row is an error naming its line") {
  struct Case {
    std::string row, message;
  };
  const std::vector<Case> cases = {
      {"0,shop,primary,ams,yes", "t.csv:3: ok must be 0 or 1, got \"yes\""},
      {"0,shop,primary,ams,", "t.csv:3: ok must be 0 or 1, got \"\""},
      {"0,shop,tertiary,ams,1", "t.csv:3: site must be primary or secondary, got \"tertiary\""},
      {"abc,shop,primary,ams,1", "t.csv:3: t must be a number of seconds, got \"abc\""},
      {"5s,shop,primary,ams,1", "t.csv:3: t must be a number of seconds, got \"5s\""},
      {",shop,primary,ams,1", "t.csv:3: t must be a number of seconds, got \"\""},
      {"nan,shop,primary,ams,1", "t.csv:3: t must be a number of seconds, got \"nan\""},
      {"inf,shop,primary,ams,1", "t.csv:3: t must be a number of seconds, got \"inf\""},
      {"-1,shop,primary,ams,1",
       "t.csv:3: t must be between 0 and 315360000 seconds (10 years), got \"-1\""},
      {"315360001,shop,primary,ams,1",
       "t.csv:3: t must be between 0 and 315360000 seconds (10 years), got \"315360001\""},
      {"1,shop,primary", "t.csv:3: expected at least 5 columns, got 3"},
      {"1,shop,primary,\"ams,1", "t.csv:3: unterminated quoted field in column 4"},
      {"1,shop,primary,\"ams\"x,1", "t.csv:3: unexpected text after the quoted field in column 4"},
  };
  for (const auto& c : cases) {
    INFO(c.row);
    CHECK(error_of(kHeader + "0,shop,primary,ams,1\n" + c.row + "\n") == c.message);
  }
}

TEST_CASE("timeline: rows must be in non-decreasing t") {
  CHECK(
      error_of(kHeader + "5,shop,primary,ams,1\n5,shop,primary,fra,1\n4.5,shop,primary,ams,1\n") ==
      "t.csv:4: t 4.5 is before the previous row's t (rows must be in non-decreasing t)");
}

TEST_CASE("timeline: the header must name every column once") {
  CHECK(error_of("t,group,site,ok\n") ==
        "t.csv:1: header lacks column(s) location (expected t,group,site,location,ok in any "
        "order)");
  CHECK(error_of("time,grp\n") ==
        "t.csv:1: header lacks column(s) t, group, site, location, ok (expected "
        "t,group,site,location,ok in any order)");
  CHECK(error_of("t,group,site,location,ok,t\n") ==
        "t.csv:1: column \"t\" appears twice in the header");
}

TEST_CASE("timeline: an empty file is an error, a header alone has no rows") {
  CHECK(error_of("") == "t.csv:1: empty file: expected a header line t,group,site,location,ok");
  CHECK(error_of("\n\r\n") ==
        "t.csv:1: empty file: expected a header line t,group,site,location,ok");
  CHECK(parse(kHeader).empty());
}

TEST_CASE("timeline: a problem reported by the row handler names the line") {
  try {
    read_timeline_text(kHeader + "0,shop,primary,ams,1\n1,shop,primary,xyz,1\n", "t.csv",
                       [](const TimelineRow& r) {
                         return r.location == "xyz" ? std::string("no such location") : "";
                       });
    FAIL("no error");
  } catch (const TimelineError& e) {
    CHECK(std::string(e.what()) == "t.csv:3: no such location");
  }
}

TEST_CASE("timeline: lines longer than 64 KiB are refused") {
  TempDir dir;
  const std::string longline = "1,shop,primary,ams,1," + std::string(70 * 1024, 'x') + "\n";
  const std::string text = kHeader + "0,shop,primary,ams,1\n" + longline + "2,shop,primary,ams,1\n";
  CHECK(error_of(text) == "t.csv:3: line longer than 65536 bytes");
  const std::string path = dir.write("long.csv", text);
  try {
    read_timeline(path, [](const TimelineRow&) { return std::string(); });
    FAIL("no error");
  } catch (const TimelineError& e) {
    CHECK(std::string(e.what()) == path + ":3: line longer than 65536 bytes");
  }
  // Just below the limit is fine.
  const std::string fits = "1,shop,primary,ams,1," + std::string(65536 - 21, 'x') + "\n";
  REQUIRE(fits.size() == 65537);
  CHECK(parse(kHeader + fits).size() == 1);
}

TEST_CASE("timeline: the file reader streams across its blocks and agrees with the text reader") {
  TempDir dir;
  std::string text = "site,t,location,group,ok,latency_ms\r\n";
  const char* locs[] = {"ams", "fra", "lon"};
  // About 2.5 MiB: several read blocks, lines cut at block boundaries.
  for (int i = 0; i < 60000; ++i)
    text += std::string(i % 2 ? "secondary," : "primary,") + std::to_string(i / 2) + "." +
            std::to_string(i % 10) + "," + locs[i % 3] + ",shop," + std::to_string(i % 7 != 0) +
            "," + std::string(size_t(i % 13), '9') + "\r\n";
  const std::string path = dir.write("big.csv", text);
  size_t n = 0;
  int64_t sum_ms = 0;
  int oks = 0;
  TimelineStats st = read_timeline(path, [&](const TimelineRow& r) {
    ++n;
    sum_ms += fo::core::to_ms(r.at);
    oks += r.ok;
    if (r.line != n + 1) return std::string("line numbers out of step");
    return std::string();
  });
  CHECK(n == 60000);
  CHECK(st.rows == 60000);
  CHECK(st.lines == 60001);
  CHECK(fo::core::to_ms(st.last) == 29999900);
  const auto same = parse(text);
  REQUIRE(same.size() == 60000);
  int64_t sum2 = 0;
  int oks2 = 0;
  for (const auto& r : same) {
    sum2 += r.ms;
    oks2 += r.ok;
  }
  CHECK(sum_ms == sum2);
  CHECK(oks == oks2);
  CHECK(oks == 60000 - 8572);
}

TEST_CASE("timeline: a missing file is an error naming the file") {
  TempDir dir;
  const std::string path = dir.file("nope.csv");
  try {
    read_timeline(path, [](const TimelineRow&) { return std::string(); });
    FAIL("no error");
  } catch (const TimelineError& e) {
    CHECK(std::string(e.what()) == path + ":1: cannot open timeline: No such file or directory");
  }
}
