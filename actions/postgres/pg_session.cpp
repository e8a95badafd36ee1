// PostgreSQL connection on the loop (see pg_session.hpp).
#include "actions/postgres/pg_session.hpp"

#include <libpq-fe.h>
#include <sys/epoll.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "daemon/platform/event.hpp"

namespace fo::actions::pg {
namespace {

struct ConnFinish {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultClear>;

std::string bounded(std::string_view text, std::size_t limit) {
  std::string out(text.substr(0, limit));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  if (text.size() > limit) out += "...";
  return out;
}

bool permanent_connect_error(const std::string& message) {
  for (const char* marker : {"authentication failed", "no password supplied", "pg_hba.conf",
                             "does not exist", "password is required"})
    if (message.find(marker) != std::string::npos) return true;
  return false;
}

}  // namespace

std::string describe_error(const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));
  if (line.find("Connection refused") != std::string::npos) return "connection refused";
  if (std::size_t at = line.find(" failed: ");
      at != std::string::npos && line.find("connection to server") == 0)
    line = line.substr(at + 9);
  if (line.rfind("ERROR:  ", 0) == 0 || line.rfind("FATAL:  ", 0) == 0) line = line.substr(8);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  if (line.empty()) return "connection failed";
  return bounded(line, kMaxErrorText);
}

std::optional<std::uint64_t> parse_lsn(const std::string& text) {
  unsigned hi = 0, lo = 0;
  char tail = 0;
  if (text.size() > 17 || std::sscanf(text.c_str(), "%X/%X%c", &hi, &lo, &tail) != 2)
    return std::nullopt;
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

std::string format_bytes(std::uint64_t bytes) {
  const double kb = 1024, mb = kb * 1024, gb = mb * 1024;
  const double b = static_cast<double>(bytes);
  char buf[32];
  if (b < kb)
    std::snprintf(buf, sizeof buf, "%" PRIu64 " B", bytes);
  else if (b < mb)
    std::snprintf(buf, sizeof buf, "%.0f kB", std::floor(b / kb));
  else if (b < gb)
    std::snprintf(buf, sizeof buf, "%.0f MB", std::floor(b / mb));
  else
    std::snprintf(buf, sizeof buf, "%.1f GB", b / gb);
  return buf;
}

struct Session::Impl {
  enum class Phase { connecting, idle, querying, broken };

  sd_event* event;
  std::unique_ptr<PGconn, ConnFinish> conn;
  platform::SourcePtr io;
  platform::Timer timer;
  Phase phase = Phase::connecting;
  bool flushing = false;
  std::optional<std::string> setup_error;
  ConnectDone connect_done;
  QueryDone query_done;
  Reply reply;
  bool reply_error_seen = false;

  Impl(sd_event* e) : event(e), timer(e, [this] { on_timeout(); }) {}

  static int on_io_event(sd_event_source*, int, uint32_t revents, void* self) {
    static_cast<Impl*>(self)->on_io(revents);
    return 0;
  }

  // A fresh source every time: libpq may have closed the socket and opened another one (next
  // host or address), possibly with the same number.
  bool watch(uint32_t events) {
    io.reset();
    const int fd = PQsocket(conn.get());
    sd_event_source* source = nullptr;
    if (fd < 0 || sd_event_add_io(event, &source, fd, events, &Impl::on_io_event, this) < 0)
      return false;
    io.reset(source);
    return true;
  }

  // Each finisher ends with the user's callback, which may destroy the session: nothing may
  // touch `this` after it.
  void finish_connect(ConnectResult result) {
    timer.disarm();
    io.reset();
    phase = result.ok ? Phase::idle : Phase::broken;
    ConnectDone done = std::move(connect_done);
    connect_done = nullptr;
    if (done) done(std::move(result));
  }
  void fail_connect(const std::string& message) {
    ConnectResult r;
    r.error = describe_error(message);
    r.permanent = permanent_connect_error(message);
    finish_connect(std::move(r));
  }
  void finish_query(bool connection_ok) {
    timer.disarm();
    io.reset();
    phase = connection_ok ? Phase::idle : Phase::broken;
    QueryDone done = std::move(query_done);
    query_done = nullptr;
    Reply out = std::move(reply);
    reply = Reply{};
    if (done) done(std::move(out));
  }
  void fail_query(std::string why) {
    reply.ok = false;
    reply.rows.clear();
    reply.error = bounded(why, kMaxErrorText);
    finish_query(false);
  }

  void on_timeout() {
    if (setup_error) {
      if (phase == Phase::connecting) return fail_connect(*setup_error);
      return fail_query(*setup_error);
    }
    if (phase == Phase::connecting) {
      ConnectResult r;
      r.error = "timeout connecting";
      return finish_connect(std::move(r));
    }
    if (phase == Phase::querying) fail_query("timeout waiting for the reply");
  }

  void on_io(uint32_t revents) {
    PGconn* c = conn.get();
    if (phase == Phase::connecting) {
      switch (PQconnectPoll(c)) {
        case PGRES_POLLING_READING:
          if (!watch(EPOLLIN)) return fail_connect("cannot watch the socket");
          return;
        case PGRES_POLLING_WRITING:
          if (!watch(EPOLLOUT)) return fail_connect("cannot watch the socket");
          return;
        case PGRES_POLLING_OK: {
          ConnectResult r;
          r.ok = true;
          return finish_connect(std::move(r));
        }
        default:
          return fail_connect(PQerrorMessage(c));
      }
    }
    if (phase != Phase::querying) return;
    if (flushing && (revents & EPOLLOUT)) {
      const int r = PQflush(c);
      if (r < 0) return fail_query(describe_error(PQerrorMessage(c)));
      if (r == 0) {
        flushing = false;
        sd_event_source_set_io_events(io.get(), EPOLLIN);
      }
    }
    if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_results();
  }

  void read_results() {
    PGconn* c = conn.get();
    if (!PQconsumeInput(c)) return fail_query(describe_error(PQerrorMessage(c)));
    while (!PQisBusy(c)) {
      ResultPtr r(PQgetResult(c));
      if (!r) {
        if (!reply_error_seen) reply.ok = true;
        return finish_query(true);
      }
      switch (PQresultStatus(r.get())) {
        case PGRES_SINGLE_TUPLE: {
          // A server that answers with more than we asked for is not trusted further.
          if (reply.rows.size() >= kMaxRows) return fail_query("reply has too many rows");
          std::vector<std::optional<std::string>> row;
          const int fields = PQnfields(r.get());
          if (fields > 64) return fail_query("reply has too many columns");
          for (int f = 0; f < fields; ++f) {
            if (PQgetisnull(r.get(), 0, f)) {
              row.emplace_back(std::nullopt);
              continue;
            }
            const int len = PQgetlength(r.get(), 0, f);
            if (len < 0 || static_cast<std::size_t>(len) > kMaxValueBytes)
              return fail_query("reply value too large");
            row.emplace_back(std::string(PQgetvalue(r.get(), 0, f), static_cast<std::size_t>(len)));
          }
          reply.rows.push_back(std::move(row));
          break;
        }
        case PGRES_TUPLES_OK:
        case PGRES_COMMAND_OK:
          break;
        default:
          if (!reply_error_seen) {
            reply_error_seen = true;
            reply.ok = false;
            reply.error = describe_error(PQresultErrorMessage(r.get()));
            if (const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE))
              reply.sqlstate = bounded(state, 5);
          }
          break;
      }
    }
  }
};

Session::Session(sd_event* event, const ConnectParams& params, core::Millis timeout,
                 ConnectDone done)
    : impl_(std::make_unique<Impl>(event)) {
  Impl& s = *impl_;
  s.connect_done = std::move(done);
  auto fail_soon = [&](std::string why) {
    s.setup_error = std::move(why);
    s.timer.arm_in(core::Millis(0));
  };
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : params.keywords) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  s.conn.reset(PQconnectStartParams(keys.data(), values.data(), params.expand_dbname ? 1 : 0));
  if (!s.conn) {
    fail_soon("out of memory");
    return;
  }
  if (PQstatus(s.conn.get()) == CONNECTION_BAD) {
    fail_soon(PQerrorMessage(s.conn.get()));
    return;
  }
  PQsetnonblocking(s.conn.get(), 1);
  s.timer.arm_in(timeout);
  // libpq's contract: after PQconnectStart, wait until the socket is writable, then poll.
  if (!s.watch(EPOLLOUT)) fail_soon("cannot watch the socket");
}

Session::~Session() = default;

void Session::query(std::string sql, core::Millis timeout, QueryDone done) {
  Impl& s = *impl_;
  s.query_done = std::move(done);
  s.reply = Reply{};
  s.reply_error_seen = false;
  auto fail_soon = [&](std::string why) {
    s.phase = Impl::Phase::querying;
    s.setup_error = std::move(why);
    s.timer.arm_in(core::Millis(0));
  };
  if (s.phase != Impl::Phase::idle) return fail_soon("connection not usable");
  PGconn* c = s.conn.get();
  if (!PQsendQuery(c, sql.c_str())) return fail_soon(describe_error(PQerrorMessage(c)));
  PQsetSingleRowMode(c);
  s.phase = Impl::Phase::querying;
  const int r = PQflush(c);
  if (r < 0) return fail_soon(describe_error(PQerrorMessage(c)));
  s.flushing = r == 1;
  s.timer.arm_in(timeout);
  if (!s.watch(s.flushing ? EPOLLIN | EPOLLOUT : EPOLLIN))
    return fail_soon("cannot watch the socket");
}

}  // namespace fo::actions::pg
