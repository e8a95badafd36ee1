// The blocking client: its error messages are what the operator reads.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "daemon/control/client.hpp"
#include "daemon/control/protocol.hpp"
#include "tests/control/server_thread.hpp"

using namespace fo::control;
using namespace fo::control::testing;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

// A listening socket driven by the test itself (no daemon logic at all).
class RawListener {
 public:
  explicit RawListener(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_STREAM, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd_, 8) != 0) {
      throw std::runtime_error("cannot listen");
    }
  }
  ~RawListener() { ::close(fd_); }
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Accepts one connection, reads the request line, answers `answer` verbatim and closes.
std::thread answer_once(int listen_fd, std::string answer) {
  return std::thread([listen_fd, answer = std::move(answer)] {
    int fd = ::accept(listen_fd, nullptr, nullptr);
    if (fd < 0) return;
    char c = 0;
    while (::recv(fd, &c, 1, 0) == 1 && c != '\n') {
    }
    send_all(fd, answer);
    ::close(fd);
  });
}

}  // namespace

TEST_CASE("a missing socket says the daemon may not be running", "[client]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  try {
    call(path, make_request("status"), milliseconds(1000));
    FAIL("call succeeded without a daemon");
  } catch (const ControlError& e) {
    CHECK(e.kind() == ControlError::Kind::connect);
    CHECK(std::string(e.what()) ==
          "cannot connect to " + path + ": No such file or directory (is failoverd running?)");
  }
}

TEST_CASE("a stale socket file reports the refused connection", "[client]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  { RawListener gone(path); }  // closed: the file stays, nobody listens
  CHECK_THROWS_WITH(call(path, make_request("status"), milliseconds(1000)),
                    Catch::Contains("Connection refused (is failoverd running?)"));
}

TEST_CASE("a daemon that never answers times out", "[client]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  RawListener mute(path);  // listens, never accepts: connect succeeds via the backlog
  const auto start = std::chrono::steady_clock::now();
  try {
    call(path, make_request("status"), milliseconds(200));
    FAIL("call returned without an answer");
  } catch (const ControlError& e) {
    CHECK(e.kind() == ControlError::Kind::timeout);
    CHECK(std::string(e.what()) == "timed out after 200 ms");
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= milliseconds(190));
  CHECK(elapsed < milliseconds(2000));
}

TEST_CASE("replies that are not protocol replies are rejected", "[client]") {
  TempDir dir;
  const std::string path = dir.file("control.sock");
  RawListener listener(path);

  for (std::string answer : {"garbage\n", "[1]\n", "{\"text\": \"no result\"}\n", ""}) {
    std::thread server = answer_once(listener.fd(), answer);
    try {
      call(path, make_request("status"), milliseconds(2000));
      FAIL("accepted the reply '" << answer << "'");
    } catch (const ControlError& e) {
      CHECK(e.kind() == ControlError::Kind::malformed);
      CHECK(std::string(e.what()).rfind("malformed reply", 0) == 0);
    }
    server.join();
  }

  // A reply above 16 MiB is cut off rather than buffered without bound.
  std::thread flood = answer_once(listener.fd(), std::string(kMaxReplyBytes + 70000, 'x'));
  CHECK_THROWS_WITH(call(path, make_request("status"), milliseconds(5000)),
                    Catch::Contains("larger than"));
  flood.join();

  // A well-formed reply without a trailing newline (closed connection) is accepted.
  std::thread fine = answer_once(listener.fd(), R"({"result": 4, "text": "no"})");
  json reply = call(path, make_request("status"), milliseconds(2000));
  CHECK(reply["result"] == kResultRefused);
  fine.join();
}
