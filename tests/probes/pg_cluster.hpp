// Test helper: a real PostgreSQL 15 primary and a streaming standby on 127.0.0.1 (RECIPES §4),
// run as the postgres user from a temp dir, on ports picked free at runtime. Both servers are
// children of the test (postgres in the foreground, no pg_ctl), so they die with it; the
// destructor stops them with a bounded wait. Fails with a clear message when PostgreSQL 15
// is not installed.
#pragma once

#include <libpq-fe.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "tests/probes/child_process.hpp"
#include "tests/probes/probe_rig.hpp"

namespace fo::test {

inline constexpr const char* kPgBin = "/usr/lib/postgresql/15/bin";

class PgPair {
 public:
  PgPair() : dir_("fo-pg") {
    const std::string bin = kPgBin;
    for (const char* tool : {"postgres", "initdb", "pg_basebackup"})
      if (::access((bin + "/" + tool).c_str(), X_OK) != 0)
        FAIL(bin + "/" + tool + " not found: install postgresql-15 (scripts/install-deps.sh)");
    as_ = RunAs::user("postgres");
    const std::string b = dir_.path();
    std::filesystem::create_directory(b + "/sock");
    if (as_.uid != static_cast<uid_t>(-1)) {
      REQUIRE(::chown(b.c_str(), as_.uid, as_.gid) == 0);
      REQUIRE(::chown((b + "/sock").c_str(), as_.uid, as_.gid) == 0);
    }
    env_ = {"PATH=" + bin + ":/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + b};
    primary_port_ = unused_port();
    standby_port_ = unused_port();
    while (standby_port_ == primary_port_) standby_port_ = unused_port();

    run({bin + "/initdb", "-D", b + "/primary", "-U", "postgres", "--auth=trust", "-E", "UTF8",
         "--locale=C.UTF-8", "--no-sync"},
        "initdb");
    std::ofstream(b + "/primary/postgresql.conf", std::ios::app)
        << "listen_addresses = '127.0.0.1'\n"
        << "unix_socket_directories = '" << b << "/sock'\n"
        << "wal_level = replica\nmax_wal_senders = 10\nhot_standby = on\n"
        << "fsync = off\nsynchronous_commit = off\nmax_connections = 30\n"
        << "shared_buffers = 16MB\nwal_keep_size = 256MB\n";
    std::ofstream(b + "/primary/pg_hba.conf", std::ios::app)
        << "host replication all 127.0.0.1/32 trust\n";
    primary_ = Child({bin + "/postgres", "-D", b + "/primary", "-p", std::to_string(primary_port_)},
                     env_, b + "/primary.log", as_);
    wait_ready(primary_port_, primary_, "primary");
    run({bin + "/pg_basebackup", "-h", "127.0.0.1", "-p", std::to_string(primary_port_), "-U",
         "postgres", "-D", b + "/standby", "-R", "-X", "stream", "-c", "fast", "--no-sync"},
        "pg_basebackup");
    standby_ = Child({bin + "/postgres", "-D", b + "/standby", "-p", std::to_string(standby_port_)},
                     env_, b + "/standby.log", as_);
    wait_ready(standby_port_, standby_, "standby");
    const bool streaming = poll_until(std::chrono::seconds(30), [&] {
      return sql(primary_port_,
                 "SELECT count(*) FROM pg_stat_replication WHERE state = "
                 "'streaming'") == "1";
    });
    INFO(read_text(b + "/standby.log"));
    REQUIRE(streaming);
  }
  ~PgPair() {
    // Fast shutdown (SIGINT); the standby first, so the primary has no walsender to wait for.
    standby_.stop(SIGINT, std::chrono::seconds(15));
    primary_.stop(SIGINT, std::chrono::seconds(15));
  }
  PgPair(const PgPair&) = delete;
  PgPair& operator=(const PgPair&) = delete;

  int primary_port() const { return primary_port_; }
  int standby_port() const { return standby_port_; }
  std::string socket_dir() const { return dir_.path() + "/sock"; }
  const RunAs& run_as() const { return as_; }
  TempDir& dir() { return dir_; }

  // First column of the first row, "OK" for commands, "ERROR: ..." on errors; over a short
  // blocking connection.
  static std::string sql(int port, const std::string& query) {
    const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port) +
                                 " dbname=postgres user=postgres connect_timeout=5";
    std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(conninfo.c_str()), &PQfinish);
    if (PQstatus(conn.get()) != CONNECTION_OK)
      return std::string("ERROR: ") + PQerrorMessage(conn.get());
    std::unique_ptr<PGresult, decltype(&PQclear)> res(PQexec(conn.get(), query.c_str()), &PQclear);
    const auto status = PQresultStatus(res.get());
    if (status == PGRES_COMMAND_OK) return "OK";
    if (status != PGRES_TUPLES_OK || PQntuples(res.get()) < 1)
      return std::string("ERROR: ") + PQresultErrorMessage(res.get());
    return PQgetvalue(res.get(), 0, 0);
  }

  template <typename Pred>
  static bool poll_until(std::chrono::milliseconds limit, Pred done) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      ::usleep(20 * 1000);
    }
    return true;
  }

 private:
  void run(const std::vector<std::string>& argv, const std::string& what) {
    const std::string log = dir_.file(what + ".log");
    const int rc = run_command(argv, env_, log, as_, std::chrono::seconds(120));
    INFO(read_text(log));
    if (rc != 0) FAIL(what + " failed with exit code " + std::to_string(rc));
  }
  void wait_ready(int port, Child& child, const std::string& what) {
    const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port) +
                                 " dbname=postgres user=postgres connect_timeout=2";
    const bool ready = poll_until(std::chrono::seconds(30), [&] {
      return !child.running() || PQping(conninfo.c_str()) == PQPING_OK;
    });
    INFO(read_text(dir_.file(what + ".log")));
    REQUIRE(child.running());
    REQUIRE(ready);
  }

  TempDir dir_;
  RunAs as_;
  std::vector<std::string> env_;
  int primary_port_ = 0;
  int standby_port_ = 0;
  Child primary_;
  Child standby_;
};

}  // namespace fo::test
