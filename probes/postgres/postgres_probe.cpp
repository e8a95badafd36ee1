// PostgreSQL probe on the loop (see postgres_probe.hpp).
#include "probes/postgres/postgres_probe.hpp"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <sys/epoll.h>
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "probes/net.hpp"

namespace fo::probes {
namespace {

constexpr std::size_t kMaxErrorText = 200;
constexpr const char* kApplicationName = "failoverd-probe";

// One round trip answers every question. On a primary the WAL functions give NULL. The time
// lag counts as 0 while everything received is replayed: an idle primary sends no
// transactions, and the last replayed one would otherwise look older and older.
constexpr const char* kQuery =
    "SELECT pg_is_in_recovery(), "
    "pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::float8, "
    "CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0::float8 "
    "ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 END";

struct ConnFinish {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnFinish>;
struct ResultClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultClear>;
struct OptionsFree {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};

bool is_ip(const std::string& s) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

// libpq resolves host names synchronously inside PQconnectStart: refuse them, and passwords
// (they belong in password_file). The loader checks the key form; conninfo is checked here.
std::string conninfo_problem(const std::string& conninfo) {
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, OptionsFree> options(PQconninfoParse(conninfo.c_str(), &err));
  if (!options) {
    std::string why = err ? describe_pq_error(err) : "out of memory";
    if (err) PQfreemem(err);
    return "invalid conninfo: " + why;
  }
  std::string host, hostaddr;
  for (PQconninfoOption* o = options.get(); o->keyword; ++o) {
    const std::string key = o->keyword;
    const std::string value = o->val ? o->val : "";
    if (key == "password" && !value.empty())
      return "conninfo must not contain a password (use password_file)";
    if (key == "host") host = value;
    if (key == "hostaddr") hostaddr = value;
  }
  if (!hostaddr.empty() || host.empty()) return "";
  std::size_t start = 0;
  while (start <= host.size()) {
    std::size_t end = host.find(',', start);
    if (end == std::string::npos) end = host.size();
    const std::string one = host.substr(start, end - start);
    if (!one.empty() && one[0] != '/' && !is_ip(one))
      return "host " + shorten(one, 64) + " is not an IP address (a name lookup would block)";
    start = end + 1;
  }
  return "";
}

std::string format_seconds(double seconds) {
  char buf[32];
  if (seconds < 1)
    std::snprintf(buf, sizeof buf, "%.0f ms", seconds * 1000);
  else
    std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  return buf;
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  const double kb = 1024, mb = kb * 1024, gb = mb * 1024;
  const double b = static_cast<double>(bytes);
  char buf[32];
  if (b < kb)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else if (b < mb)
    std::snprintf(buf, sizeof buf, "%.0f kB", std::floor(b / kb));
  else if (b < gb)
    std::snprintf(buf, sizeof buf, "%.0f MB", std::floor(b / mb));
  else
    std::snprintf(buf, sizeof buf, "%.1f GB", b / gb);
  return buf;
}

std::string describe_pq_error(const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));
  if (line.find("Connection refused") != std::string::npos) return "connection refused";
  if (std::size_t at = line.find(" failed: ");
      at != std::string::npos && line.find("connection to server") == 0)
    line = line.substr(at + 9);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  if (line.empty()) return "connection failed";
  return shorten(line, kMaxErrorText);
}

std::string password_file_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return "cannot use password_file " + shorten(path, 100) + ": " + errno_phrase(errno);
  if (!S_ISREG(st.st_mode)) return "password_file " + shorten(path, 100) + " is not a file";
  // libpq itself silently ignores such a file, and authentication would fail obscurely.
  if ((st.st_mode & 077) != 0)
    return "password_file " + shorten(path, 100) +
           " must not be accessible by group or others (chmod 600)";
  return "";
}

struct PostgresPlugin::Check {
  enum class Phase { connecting, querying };
  config::PostgresProbe spec;
  ConnPtr conn;
  std::unique_ptr<IoWatch> io;
  std::unique_ptr<platform::Timer> timer;
  Phase phase = Phase::connecting;
  bool flushing = false;
  ResultPtr result;  // the first result of the query
  std::optional<std::string> setup_error;
  std::function<void(ProbeResult)> done;
};

PostgresPlugin::PostgresPlugin(sd_event* event) : event_(event) {}
PostgresPlugin::~PostgresPlugin() = default;

void PostgresPlugin::start(const config::Probe& probe, const config::Location&,
                           std::function<void(ProbeResult)> done) {
  auto check = std::make_unique<Check>();
  Check& c = *check;
  c.spec = probe.postgres;
  c.done = std::move(done);
  const uint64_t id = checks_.add(std::move(check));
  c.timer = std::make_unique<platform::Timer>(event_, [this, id] { on_timeout(id); });
  auto fail_soon = [&](std::string why) {
    c.setup_error = std::move(why);
    c.timer->arm_in(platform::Millis(0));
  };
  if (!c.spec.password_file.empty()) {
    if (std::string problem = password_file_problem(c.spec.password_file); !problem.empty())
      return fail_soon(problem);
  }
  std::vector<const char*> keys, values;
  const std::string port = std::to_string(c.spec.port);
  if (!c.spec.conninfo.empty()) {
    if (std::string problem = conninfo_problem(c.spec.conninfo); !problem.empty())
      return fail_soon(problem);
    keys.push_back("dbname");  // expanded (expand_dbname = 1): a full conninfo string
    values.push_back(c.spec.conninfo.c_str());
  } else {
    for (auto [k, v] : {std::pair{"host", c.spec.host.c_str()},
                        {"port", port.c_str()},
                        {"dbname", c.spec.dbname.c_str()},
                        {"user", c.spec.user.c_str()}}) {
      keys.push_back(k);
      values.push_back(v);
    }
  }
  // Later keywords override what the conninfo string says.
  keys.push_back("application_name");
  values.push_back(kApplicationName);
  if (!c.spec.password_file.empty()) {
    keys.push_back("passfile");
    values.push_back(c.spec.password_file.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  c.conn.reset(PQconnectStartParams(keys.data(), values.data(), c.spec.conninfo.empty() ? 0 : 1));
  if (!c.conn) return fail_soon("out of memory");
  if (PQstatus(c.conn.get()) == CONNECTION_BAD)
    return fail_soon(describe_pq_error(PQerrorMessage(c.conn.get())));
  PQsetnonblocking(c.conn.get(), 1);
  c.timer->arm_in(c.spec.timeout);
  // libpq's contract: after PQconnectStart, wait until the socket is writable, then poll.
  watch(id, EPOLLOUT);
}

void PostgresPlugin::watch(uint64_t id, uint32_t events) {
  Check* c = checks_.find(id);
  // A fresh source every time: libpq may have closed the socket and opened another one
  // (next host or address, SSL fallback), possibly with the same number.
  c->io.reset();
  const int fd = PQsocket(c->conn.get());
  if (fd < 0) return checks_.finish(id, ProbeResult::failure("connection lost"));
  c->io = std::make_unique<IoWatch>(event_, fd, events,
                                    [this, id](uint32_t revents) { on_io(id, revents); });
  if (!c->io->ok()) checks_.finish(id, ProbeResult::failure("cannot watch socket"));
}

void PostgresPlugin::on_io(uint64_t id, uint32_t revents) {
  Check* c = checks_.find(id);
  if (!c) return;
  PGconn* conn = c->conn.get();
  if (c->phase == Check::Phase::connecting) {
    switch (PQconnectPoll(conn)) {
      case PGRES_POLLING_READING:
        return watch(id, EPOLLIN);
      case PGRES_POLLING_WRITING:
        return watch(id, EPOLLOUT);
      case PGRES_POLLING_OK:
        return send_query(id);
      default:
        return checks_.finish(id, ProbeResult::failure(describe_pq_error(PQerrorMessage(conn))));
    }
  }
  if (c->flushing && (revents & EPOLLOUT)) {
    const int r = PQflush(conn);
    if (r < 0)
      return checks_.finish(id, ProbeResult::failure(describe_pq_error(PQerrorMessage(conn))));
    if (r == 0) {
      c->flushing = false;
      c->io->set_events(EPOLLIN);
    }
  }
  if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_results(id);
}

void PostgresPlugin::send_query(uint64_t id) {
  Check* c = checks_.find(id);
  c->phase = Check::Phase::querying;
  PGconn* conn = c->conn.get();
  if (!PQsendQuery(conn, kQuery))
    return checks_.finish(id, ProbeResult::failure(describe_pq_error(PQerrorMessage(conn))));
  const int r = PQflush(conn);
  if (r < 0)
    return checks_.finish(id, ProbeResult::failure(describe_pq_error(PQerrorMessage(conn))));
  c->flushing = r == 1;
  watch(id, c->flushing ? EPOLLIN | EPOLLOUT : EPOLLIN);
}

void PostgresPlugin::read_results(uint64_t id) {
  Check* c = checks_.find(id);
  PGconn* conn = c->conn.get();
  auto fail = [&](std::string why) { checks_.finish(id, ProbeResult::failure(std::move(why))); };
  if (!PQconsumeInput(conn)) return fail(describe_pq_error(PQerrorMessage(conn)));
  while (!PQisBusy(conn)) {
    ResultPtr r(PQgetResult(conn));
    if (!r) break;
    if (!c->result) c->result = std::move(r);
  }
  if (PQisBusy(conn)) return;  // more to come
  PGresult* res = c->result.get();
  if (!res) return fail("no result");
  if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) != 3)
    return fail("query failed: " + describe_pq_error(PQresultErrorMessage(res)));
  const bool in_recovery = std::strcmp(PQgetvalue(res, 0, 0), "t") == 0;
  const config::PostgresProbe& spec = c->spec;
  if (spec.role == "primary" && in_recovery) return fail("in recovery, expected primary");
  if (spec.role == "standby" && !in_recovery) return fail("not in recovery, expected standby");
  if (spec.max_lag_bytes > 0) {
    if (PQgetisnull(res, 0, 1)) return fail("replay lag unknown: no WAL received yet");
    const double lag = std::max(0.0, std::strtod(PQgetvalue(res, 0, 1), nullptr));
    if (lag > static_cast<double>(spec.max_lag_bytes))
      return fail("replay lag " + format_bytes(static_cast<std::uint64_t>(lag)) + " > " +
                  format_bytes(spec.max_lag_bytes));
  }
  if (spec.max_lag_time.count() > 0) {
    if (PQgetisnull(res, 0, 2)) return fail("replay lag unknown: nothing replayed yet");
    const double lag = std::max(0.0, std::strtod(PQgetvalue(res, 0, 2), nullptr));
    if (lag * 1000 > static_cast<double>(spec.max_lag_time.count()))
      return fail("replay lag " + format_seconds(lag) + " > " +
                  format_seconds(static_cast<double>(spec.max_lag_time.count()) / 1000));
  }
  checks_.finish(id, ProbeResult::success());
}

void PostgresPlugin::on_timeout(uint64_t id) {
  Check* c = checks_.find(id);
  if (!c) return;
  if (c->setup_error) return checks_.finish(id, ProbeResult::failure(*c->setup_error));
  checks_.finish(id, ProbeResult::failure(
                         "timeout after " + std::to_string(c->spec.timeout.count()) + " ms " +
                         (c->phase == Check::Phase::connecting ? "connecting" : "in the query")));
}

}  // namespace fo::probes
