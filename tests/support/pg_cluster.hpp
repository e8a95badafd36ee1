// Test helper: a real PostgreSQL 15 primary ("a", site primary) and a streaming standby ("b",
// site secondary) on 127.0.0.1 (RECIPES §4), run as the postgres user from a temp dir, on ports
// picked free at runtime. Set up for failover and failback too: wal_log_hints for pg_rewind, a
// password-authenticated superuser `failoverd`, ports on the command line (pg_rewind copies
// postgresql.conf), stopping/starting each node. Servers are children of the test (postgres in
// the foreground, parent-death signal), so they die with it; the destructor stops them with a
// bounded wait. Fails with a clear message when PostgreSQL 15 is not installed.
// Used by tests/probes (postgres probe) and tests/steps/postgres (postgres step).
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
#include <vector>

#include "tests/probes/child_process.hpp"
#include "tests/probes/probe_rig.hpp"

namespace fo::test {

inline constexpr const char* kPgBinDir = "/usr/lib/postgresql/15/bin";
inline constexpr const char* kStepUser = "failoverd";
inline constexpr const char* kStepPassword = "s3cret-Pw-for-tests";

class PgCluster {
 public:
  struct Node {
    std::string name;
    std::string data;
    int port = 0;
    Child child;
  };

  PgCluster() : dir_("fo-pg") {
    const std::string bin = kPgBinDir;
    for (const char* tool : {"postgres", "initdb", "pg_basebackup", "pg_rewind", "pg_ctl"})
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
    a_.name = "a";
    b_.name = "b";
    a_.data = b + "/a";
    b_.data = b + "/b";
    a_.port = unused_port();
    b_.port = unused_port();
    while (b_.port == a_.port) b_.port = unused_port();

    run({bin + "/initdb", "-D", a_.data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
         "--locale=C.UTF-8", "--no-sync"},
        "initdb");
    std::ofstream(a_.data + "/postgresql.conf", std::ios::app)
        << "listen_addresses = '127.0.0.1'\n"
        << "unix_socket_directories = '" << b << "/sock'\n"
        << "wal_level = replica\nmax_wal_senders = 10\nhot_standby = on\n"
        << "wal_log_hints = on\n"
        << "fsync = off\nsynchronous_commit = off\nmax_connections = 30\n"
        << "shared_buffers = 16MB\nwal_keep_size = 256MB\n";
    // The step's own user authenticates with a password; everything else is trusted.
    std::ofstream(a_.data + "/pg_hba.conf", std::ios::trunc)
        << "local all all trust\n"
        << "host all " << kStepUser << " 127.0.0.1/32 scram-sha-256\n"
        << "host all all 127.0.0.1/32 trust\n"
        << "host replication all 127.0.0.1/32 trust\n";
    start(a_);
    REQUIRE(sql(a_.port, std::string("CREATE ROLE ") + kStepUser + " SUPERUSER LOGIN PASSWORD '" +
                             kStepPassword + "'") == "OK");
    run({bin + "/pg_basebackup", "-h", "127.0.0.1", "-p", std::to_string(a_.port), "-U", "postgres",
         "-D", b_.data, "-R", "-X", "stream", "-c", "fast", "--no-sync"},
        "pg_basebackup");
    start(b_);
    const bool streaming = wait_streaming(a_);
    INFO(read_text(dir_.path() + "/b.log"));
    REQUIRE(streaming);
  }
  ~PgCluster() {
    // Fast shutdown (SIGINT); the standby first, so a primary has no walsender to wait for.
    const bool a_standby = sql(a_.port, "SELECT pg_is_in_recovery()") == "t";
    Node& first = a_standby ? a_ : b_;
    Node& second = a_standby ? b_ : a_;
    first.child.stop(SIGINT, std::chrono::seconds(15));
    second.child.stop(SIGINT, std::chrono::seconds(15));
  }
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  Node& a() { return a_; }
  Node& b() { return b_; }
  // The ports of the primary and the standby as set up (a and b until a test swaps roles).
  int primary_port() const { return a_.port; }
  int standby_port() const { return b_.port; }
  std::string socket_dir() const { return dir_.path() + "/sock"; }
  const std::string& path() const { return dir_.path(); }
  TempDir& dir() { return dir_; }
  const RunAs& run_as() const { return as_; }
  const std::vector<std::string>& env() const { return env_; }

  void start(Node& n) {
    n.child =
        Child({std::string(kPgBinDir) + "/postgres", "-D", n.data, "-p", std::to_string(n.port)},
              env_, dir_.path() + "/" + n.name + ".log", as_);
    const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(n.port) +
                                 " dbname=postgres user=postgres connect_timeout=2";
    const bool ready = poll_until(std::chrono::seconds(30), [&] {
      return !n.child.running() || PQping(conninfo.c_str()) == PQPING_OK;
    });
    INFO(read_text(dir_.path() + "/" + n.name + ".log"));
    REQUIRE(n.child.running());
    REQUIRE(ready);
  }
  void stop(Node& n) { n.child.stop(SIGINT, std::chrono::seconds(15)); }

  // Whether `primary` has a streaming standby, within 30 s.
  bool wait_streaming(Node& primary) {
    return poll_until(std::chrono::seconds(30), [&] {
      return sql(primary.port,
                 "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") == "1";
    });
  }

  // First column of the first row, "OK" for commands, "ERROR: ..." on errors; over a short
  // blocking connection as the trusted postgres user.
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

  // Runs a command as the postgres user with this cluster's environment; its exit code.
  int run_logged(const std::vector<std::string>& argv, const std::string& what,
                 std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    const std::string log = dir_.file(what + ".log");
    const int rc = run_command(argv, env_, log, as_, limit);
    UNSCOPED_INFO(what << " output:\n" << read_text(log));
    return rc;
  }

 private:
  void run(const std::vector<std::string>& argv, const std::string& what) {
    const int rc = run_logged(argv, what, std::chrono::seconds(120));
    if (rc != 0) FAIL(what + " failed with exit code " + std::to_string(rc));
  }

  TempDir dir_;
  RunAs as_;
  std::vector<std::string> env_;
  Node a_;
  Node b_;
};

}  // namespace fo::test
