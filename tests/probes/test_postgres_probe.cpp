// PostgreSQL probe against a real PostgreSQL 15 primary + streaming standby (set up once for
// the sections of one test case), plus refused and silent servers.
#include <sys/socket.h>
#include <sys/stat.h>
#include <catch2/catch.hpp>

#include <string>

#include "probes/net.hpp"
#include "tests/probes/probe_rig.hpp"
#include "tests/support/pg_cluster.hpp"

using fo::config::Probe;
using fo::test::ProbeRig;
using Ms = std::chrono::milliseconds;
using PgPair = fo::test::PgCluster;

namespace {

// Created on first use and stopped at exit (RAII): every section of the test case shares it.
PgPair& pair() {
  static PgPair p;
  return p;
}

Probe pg_probe(int port, const std::string& role = "") {
  Probe p;
  p.name = "pg";
  p.kind = "postgres";
  p.postgres.host = "127.0.0.1";
  p.postgres.port = port;
  p.postgres.role = role;
  p.postgres.timeout = Ms(5000);
  return p;
}

}  // namespace

TEST_CASE("postgres probe against a primary and a streaming standby", "[probes][postgres]") {
  PgPair& pg = pair();
  ProbeRig rig;
  const int primary = pg.primary_port();
  const int standby = pg.standby_port();

  SECTION("the server answers (SELECT 1)") {
    auto r = rig.run(pg_probe(primary));
    CHECK(r.error.empty());
    CHECK(rig.took_ms < 2000);
    CHECK(rig.run(pg_probe(standby)).ok);
  }
  SECTION("role primary") {
    CHECK(rig.run(pg_probe(primary, "primary")).ok);
    CHECK(rig.run(pg_probe(standby, "primary")).error == "postgres: in recovery, expected primary");
  }
  SECTION("role standby") {
    CHECK(rig.run(pg_probe(standby, "standby")).ok);
    CHECK(rig.run(pg_probe(primary, "standby")).error ==
          "postgres: not in recovery, expected standby");
  }
  SECTION("conninfo and a unix socket directory") {
    Probe p = pg_probe(0, "standby");
    p.postgres.host.clear();
    p.postgres.conninfo = "host=127.0.0.1 port=" + std::to_string(standby) + " user=postgres";
    CHECK(rig.run(p).ok);
    Probe sock = pg_probe(primary, "primary");
    sock.postgres.host = pg.socket_dir();
    CHECK(rig.run(sock).ok);
    p.postgres.conninfo = "host=localhost port=" + std::to_string(standby);
    CHECK(rig.run(p).error ==
          "postgres: host localhost is not an IP address (a name lookup would block)");
    p.postgres.conninfo = "host=127.0.0.1 password=secret";
    CHECK(rig.run(p).error == "postgres: conninfo must not contain a password (use password_file)");
  }
  SECTION("server errors are reported") {
    Probe p = pg_probe(primary);
    p.postgres.dbname = "nope";
    CHECK(rig.run(p).error == "postgres: FATAL:  database \"nope\" does not exist");
  }
  SECTION("password_file must be private") {
    const std::string file = pg.dir().write("pgpass", "127.0.0.1:*:*:postgres:unused\n", 0600);
    Probe p = pg_probe(primary);
    p.postgres.password_file = file;
    CHECK(rig.run(p).ok);
    ::chmod(file.c_str(), 0640);
    CHECK(rig.run(p).error == "postgres: password_file " + file +
                                  " must not be accessible by group or others (chmod 600)");
    p.postgres.password_file = pg.dir().file("missing");
    CHECK(rig.run(p).error == "postgres: cannot use password_file " + p.postgres.password_file +
                                  ": no such file or directory");
  }
  SECTION("replay lag in bytes and time") {
    REQUIRE(PgPair::sql(primary, "CREATE TABLE IF NOT EXISTS lag_t(x int)") == "OK");
    REQUIRE(PgPair::sql(primary, "INSERT INTO lag_t VALUES (1)") == "OK");
    // The standby has replayed a transaction (with synchronous_commit = off the commit
    // reaches the standby a little later than pg_current_wal_lsn() suggests).
    REQUIRE(PgPair::poll_until(std::chrono::seconds(20), [&] {
      return PgPair::sql(standby,
                         "SELECT pg_last_xact_replay_timestamp() IS NOT NULL AND "
                         "EXISTS (SELECT 1 FROM lag_t)") == "t";
    }));
    Probe bytes = pg_probe(standby, "standby");
    bytes.postgres.max_lag_bytes = 16ull << 20;
    CHECK(rig.run(bytes).ok);
    Probe time = pg_probe(standby, "standby");
    time.postgres.max_lag_time = Ms(1);
    CHECK(rig.run(time).ok);  // everything received is replayed: lag 0

    // Pause replay and write a few MB: the standby receives but does not replay.
    REQUIRE(PgPair::sql(standby, "SELECT pg_wal_replay_pause()").empty());  // returns void
    struct Resume {
      int port;
      ~Resume() { PgPair::sql(port, "SELECT pg_wal_replay_resume()"); }
    } resume{standby};
    REQUIRE(PgPair::sql(primary, "INSERT INTO lag_t SELECT generate_series(1, 100000)") == "OK");
    REQUIRE(PgPair::poll_until(std::chrono::seconds(20), [&] {
      return PgPair::sql(standby,
                         "SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), "
                         "pg_last_wal_replay_lsn()) > 1048576") == "t";
    }));
    CHECK(rig.run(bytes).ok);
    bytes.postgres.max_lag_bytes = 512 * 1024;
    CHECK_THAT(rig.run(bytes).error, Catch::Matches("postgres: replay lag [0-9]+ MB > 512 kB"));
    CHECK_THAT(rig.run(time).error, Catch::Matches("postgres: replay lag [0-9]+ ms > 1 ms"));
    time.postgres.max_lag_time = std::chrono::hours(1);
    CHECK(rig.run(time).ok);

    REQUIRE(PgPair::sql(standby, "SELECT pg_wal_replay_resume()").empty());
    CHECK(PgPair::poll_until(std::chrono::seconds(20), [&] { return rig.run(bytes).ok; }));
  }
}

TEST_CASE("postgres probe: nothing listening on the port", "[probes][postgres]") {
  ProbeRig rig;
  auto r = rig.run(pg_probe(fo::test::unused_port()));
  CHECK(r.error == "postgres: connection refused");
  CHECK(rig.took_ms < 1000);
}

TEST_CASE("postgres probe: a server that never answers times out", "[probes][postgres]") {
  ProbeRig rig;
  // Listening but never accepting: the kernel completes the handshake, nobody answers.
  fo::probes::SockAddr addr;
  REQUIRE(fo::probes::make_sockaddr("127.0.0.1", 0, addr));
  fo::probes::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(::bind(fd.get(), addr.get(), addr.len) == 0);
  REQUIRE(::listen(fd.get(), 4) == 0);
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  Probe p = pg_probe(ntohs(a.sin_port));
  p.postgres.timeout = Ms(300);
  auto r = rig.run(p);
  CHECK(r.error == "postgres: timeout after 300 ms connecting");
  CHECK(rig.took_ms < 1500);
}
