// ControlServer: round trips, credentials, malformed input, limits and socket-file handling.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <vector>

#include "daemon/control/client.hpp"
#include "tests/control/server_thread.hpp"

using namespace fo::control;
using namespace fo::control::testing;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kCallTimeout{5000};

json echo(const Request& r) {
  return reply(kResultSuccess, "echo " + r.command,
               json{{"command", r.command},
                    {"arguments", r.arguments},
                    {"peer", {{"pid", r.peer.pid}, {"uid", r.peer.uid}, {"gid", r.peer.gid}}}});
}

}  // namespace

TEST_CASE("a request round-trips with the peer's credentials", "[server]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  ServerThread server(path, echo);

  json answer = call(path, make_request("status", json{{"x", 1}}), kCallTimeout);
  CHECK(answer["result"] == kResultSuccess);
  CHECK(answer["text"] == "echo status");
  CHECK(answer["version"] == kProtocolVersion);
  CHECK(answer["arguments"]["command"] == "status");
  CHECK(answer["arguments"]["arguments"] == json{{"x", 1}});
  CHECK(answer["arguments"]["peer"]["pid"] == ::getpid());
  CHECK(answer["arguments"]["peer"]["uid"] == ::getuid());
  CHECK(answer["arguments"]["peer"]["gid"] == ::getgid());

  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0660);
}

TEST_CASE("malformed requests are answered by the server, never by the handler", "[server]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  std::atomic<int> handled{0};
  ServerThread server(path, [&](const Request& r) {
    ++handled;
    return echo(r);
  });

  CHECK(raw_exchange(path, "this is not json\n")["result"] == kResultBadRequest);
  CHECK(raw_exchange(path, "[1, 2]\n")["result"] == kResultBadRequest);
  CHECK(raw_exchange(path, R"({"arguments": {}})"
                           "\n")["result"] == kResultBadRequest);
  CHECK(raw_exchange(path, R"({"command": 7})"
                           "\n")["result"] == kResultBadRequest);
  CHECK(raw_exchange(path, R"({"command": ""})"
                           "\n")["result"] == kResultBadRequest);
  CHECK(raw_exchange(path, R"({"command": "status", "arguments": [1]})"
                           "\n")["result"] == kResultBadRequest);
  json mismatch = raw_exchange(path, R"({"command": "status", "version": 2})"
                                     "\n");
  CHECK(mismatch["result"] == kResultVersionMismatch);
  CHECK(mismatch["arguments"]["protocol"] == kProtocolVersion);
  CHECK(handled == 0);

  // A missing version means 1; a request without "\n" is complete once the peer half-closes.
  int fd = connect_raw(path);
  REQUIRE(fd >= 0);
  REQUIRE(send_all(fd, R"({"command": "status"})"));
  ::shutdown(fd, SHUT_WR);
  json answer = json::parse(read_until_closed(fd, kCallTimeout), nullptr, false);
  ::close(fd);
  CHECK(answer["result"] == kResultSuccess);
  CHECK(handled == 1);
}

TEST_CASE("an oversized request gets result 5", "[server]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  std::atomic<int> handled{0};
  ServerThread server(path, [&](const Request& r) {
    ++handled;
    return echo(r);
  });

  const std::string big(70 * 1024, 'a');
  json raw = raw_exchange(path, big + "\n");
  CHECK(raw["result"] == kResultBadRequest);
  CHECK(raw["text"].get<std::string>().find("too large") != std::string::npos);

  json answer = call(path, make_request("status", json{{"padding", big}}), kCallTimeout);
  CHECK(answer["result"] == kResultBadRequest);

  // Just under the limit still reaches the handler.
  json fits = call(path, make_request("status", json{{"padding", std::string(60 * 1024, 'b')}}),
                   kCallTimeout);
  CHECK(fits["result"] == kResultSuccess);
  CHECK(handled == 1);
}

TEST_CASE("a handler that throws yields result 1", "[server]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  ServerThread server(path, [](const Request& r) -> json {
    if (r.command == "boom") throw std::runtime_error("kaboom");
    return json("not an object");
  });
  json boom = call(path, make_request("boom"), kCallTimeout);
  CHECK(boom["result"] == kResultError);
  CHECK(boom["text"] == "internal error: kaboom");
  json odd = call(path, make_request("odd"), kCallTimeout);
  CHECK(odd["result"] == kResultError);
}

TEST_CASE("a silent client is closed after the request deadline, others are served", "[server]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  ServerLimits limits;
  limits.request_timeout = milliseconds(300);
  ServerThread server(path, echo, limits);

  const auto start = std::chrono::steady_clock::now();
  int idle = connect_raw(path);
  REQUIRE(idle >= 0);
  REQUIRE(send_all(idle, R"({"command": "sta)"));  // never finished
  for (int i = 0; i < 5; ++i) {
    CHECK(call(path, make_request("status"), kCallTimeout)["result"] == kResultSuccess);
  }
  bool closed = false;
  std::string got = read_until_closed(idle, milliseconds(5000), &closed);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ::close(idle);
  CHECK(closed);
  CHECK(got.empty());
  CHECK(elapsed >= milliseconds(290));
  CHECK(elapsed < milliseconds(3000));
}

TEST_CASE("a client that does not read its reply is dropped after the reply deadline", "[server]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  ServerLimits limits;
  limits.reply_timeout = milliseconds(300);
  // Far more than a Unix socket buffers (~200 KiB), so the write stalls while nobody reads.
  const std::string blob(2 * 1024 * 1024, 'x');
  ServerThread server(
      path,
      [&](const Request&) {
        return reply(kResultSuccess, "big", json{{"blob", blob}});
      },
      limits);

  int fd = connect_raw(path);
  REQUIRE(fd >= 0);
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(send_all(fd, R"({"command": "status"})"
                       "\n"));
  pollfd p{fd, 0, 0};  // POLLHUP is always reported: the server closed its end
  // Generous: building the reply under sanitizers on a loaded machine takes a while.
  const auto deadline = start + milliseconds(30000);
  while (!(p.revents & POLLHUP) && std::chrono::steady_clock::now() < deadline) {
    ::poll(&p, 1, 100);
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK((p.revents & POLLHUP) != 0);
  CHECK(elapsed >= milliseconds(290));
  std::string partial = read_until_closed(fd, milliseconds(5000));
  ::close(fd);
  CHECK(partial.size() < blob.size());
}

TEST_CASE("the 33rd concurrent connection is told the server is busy", "[server]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  ServerThread server(path, echo);

  std::vector<int> idle;
  for (std::size_t i = 0; i < kMaxConnections; ++i) {
    int fd = connect_raw(path);
    REQUIRE(fd >= 0);
    idle.push_back(fd);
  }
  // The server accepts in connection order, so this one is the 33rd.
  int extra = connect_raw(path);
  REQUIRE(extra >= 0);
  json busy = json::parse(read_until_closed(extra, kCallTimeout), nullptr, false);
  ::close(extra);
  CHECK(busy["result"] == kResultError);
  CHECK(busy["text"].get<std::string>().rfind("busy", 0) == 0);

  // Freeing one slot lets the next client in (the server notices the close asynchronously).
  ::close(idle.back());
  idle.pop_back();
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(5000);
  json answer;
  do {
    answer = call(path, make_request("status"), kCallTimeout);
  } while (answer["result"] != kResultSuccess && std::chrono::steady_clock::now() < deadline);
  CHECK(answer["result"] == kResultSuccess);
  for (int fd : idle) ::close(fd);
}

TEST_CASE("a stale socket file is replaced", "[server]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    ::close(fd);  // the file stays, nobody listens: like after a crash
  }
  REQUIRE(std::filesystem::exists(path));
  ServerThread server(path, echo);
  CHECK(call(path, make_request("status"), kCallTimeout)["result"] == kResultSuccess);
}

TEST_CASE("a live socket is not taken over", "[server]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  ServerThread first(path, echo);

  sd_event* raw = nullptr;
  REQUIRE(sd_event_new(&raw) >= 0);
  EventPtr event(raw);
  try {
    ControlServer second(event.get(), path, echo);
    FAIL("a second server started on a live socket");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "another failoverd is running on " + path);
  }
  CHECK(call(path, make_request("status"), kCallTimeout)["result"] == kResultSuccess);
}

TEST_CASE("a path that is not a socket is refused, a bad directory is reported", "[server]") {
  TempDir dir;
  sd_event* raw = nullptr;
  REQUIRE(sd_event_new(&raw) >= 0);
  EventPtr event(raw);

  const std::string file = dir.file("plain");
  std::ofstream(file) << "precious";
  CHECK_THROWS_WITH(ControlServer(event.get(), file, echo),
                    Catch::Contains("exists and is not a socket"));
  CHECK(std::filesystem::file_size(file) == 8);

  CHECK_THROWS_WITH(ControlServer(event.get(), dir.file("missing/control.sock"), echo),
                    Catch::Contains("cannot bind control socket") &&
                        Catch::Contains("No such file or directory"));
  CHECK_THROWS_WITH(ControlServer(event.get(), dir.file(std::string(120, 'x')), echo),
                    Catch::Contains("too long"));
}

TEST_CASE("the destructor removes the socket file", "[server]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  {
    ServerThread server(path, echo);
    CHECK(std::filesystem::exists(path));
  }
  CHECK_FALSE(std::filesystem::exists(path));
}
