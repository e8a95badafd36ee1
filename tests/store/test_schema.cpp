// Store start-up: schema creation and migrations, and clear errors for unusable databases.
#include <catch2/catch.hpp>
#include <fstream>

#include "daemon/store/store.hpp"
#include "store_test_util.hpp"

using namespace fo::store;
using namespace fo::store::test;
using Catch::Matchers::Contains;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("open creates the schema in WAL mode and re-open is idempotent", "[store][schema]") {
  TempDir dir;
  const std::string path = dir.file("state.db");
  {
    auto store = Store::open(path);
    store->record_transition(
        {1000, "web", "primary_active", "failing_over", "why", "auto", {}, 1, "primary"});
    REQUIRE(store->flush(std::chrono::seconds(5)));
  }
  {
    RawDb raw(path);
    CHECK(raw.query_int("PRAGMA user_version") == db::schema_version());
    CHECK(raw.query_text("PRAGMA journal_mode") == "wal");
    for (const char* table :
         {"transitions", "rounds", "round_gaps", "action_steps", "commands", "group_state"}) {
      INFO(table);
      CHECK(raw.query_int(std::string("SELECT count(*) FROM sqlite_schema WHERE type='table' "
                                      "AND name='") +
                          table + "'") == 1);
    }
    CHECK(raw.query_int("SELECT count(*) FROM sqlite_schema WHERE type='index' AND name LIKE "
                        "'%_group_ts'") == 5);
  }
  // Re-open: no migration runs again, data is kept, and writes still work.
  auto store = Store::open(path);
  store->record_transition(
      {2000, "web", "failing_over", "secondary_active", "done", "auto", {}, 1, "secondary"});
  REQUIRE(store->flush(std::chrono::seconds(5)));
  CHECK(store->transitions("", 0, kForever, 0).size() == 2);
  RawDb raw(path);
  CHECK(raw.query_int("PRAGMA user_version") == db::schema_version());
}

TEST_CASE("a database from a newer failoverd is refused with a clear message", "[store][schema]") {
  TempDir dir;
  const std::string path = dir.file("state.db");
  {
    RawDb raw(path);
    raw.exec("CREATE TABLE future (x INTEGER); PRAGMA user_version = 99;");
  }
  REQUIRE_THROWS_WITH(Store::open(path),
                      Contains("schema version 99") && Contains("newer") && Contains(path));
  RawDb raw(path);
  CHECK(raw.query_int("PRAGMA user_version") == 99);  // left untouched
}

TEST_CASE("a file that is not SQLite is refused and left untouched", "[store][schema]") {
  TempDir dir;
  const std::string path = dir.file("state.db");
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage.push_back(static_cast<char>((i * 131 + 7) % 251));
  {
    std::ofstream out(path, std::ios::binary);
    out << garbage;
  }
  REQUIRE_THROWS_AS(Store::open(path), StoreError);
  REQUIRE_THROWS_WITH(Store::open(path), Contains("not an SQLite database") && Contains(path));
  CHECK(read_file(path) == garbage);
}

TEST_CASE("a missing directory or a directory path is a clear error", "[store][schema]") {
  TempDir dir;
  const std::string missing = dir.file("nope") + "/state.db";
  REQUIRE_THROWS_WITH(Store::open(missing), Contains("does not exist") && Contains("nope"));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "nope"));
  REQUIRE_THROWS_WITH(Store::open(dir.path().string()), Contains("is a directory"));
  REQUIRE_THROWS_AS(Store::open(""), StoreError);
}

TEST_CASE("text is clipped at a UTF-8 character boundary", "[store][schema]") {
  CHECK(db::clip_utf8("hello", 10) == "hello");
  CHECK(db::clip_utf8("hello", 3) == "hel");
  // "é" is two bytes (C3 A9): cutting inside it drops the whole character.
  CHECK(db::clip_utf8("a\xC3\xA9z", 2) == "a");
  CHECK(db::clip_utf8("a\xC3\xA9z", 3) == "a\xC3\xA9");
  // "€" is three bytes (E2 82 AC).
  CHECK(db::clip_utf8("\xE2\x82\xAC", 2).empty());
}
