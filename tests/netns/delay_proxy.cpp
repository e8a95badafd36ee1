// Slow answers for the netns testbed: a TCP proxy that holds every accepted connection for a
// fixed delay before relaying it to the upstream. The kernel has no netem, so latency is made in
// userspace; testbed.sh DNATs a location's traffic to the proxy, and the proxy marks its own
// upstream connections (SO_MARK) so that the same DNAT rule lets them through.
//
// usage: delay_proxy LISTEN_IP:PORT UPSTREAM_IP:PORT DELAY_MS [MARK]
// Prints "ready" on stdout once it listens. Runs until killed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

namespace {

constexpr int kMaxConnections = 128;
constexpr int kIdleTimeoutMs = 30000;
constexpr long kMaxDelayMs = 600000;

std::atomic<int> g_connections{0};

// Owns one file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&&) = delete;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::optional<sockaddr_in> parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, text.substr(0, colon).c_str(), &a.sin_addr) != 1) return std::nullopt;
  char* end = nullptr;
  const long port = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 1 || port > 65535) return std::nullopt;
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= size_t(n);
  }
  return true;
}

// Copies both ways until both sides have finished sending, or nothing moves for a while.
void relay(int client, int upstream) {
  bool client_open = true, upstream_open = true;
  char buf[16384];
  while (client_open || upstream_open) {
    pollfd p[2] = {{client, short(client_open ? POLLIN : 0), 0},
                   {upstream, short(upstream_open ? POLLIN : 0), 0}};
    const int r = ::poll(p, 2, kIdleTimeoutMs);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int from = i == 0 ? client : upstream, to = i == 0 ? upstream : client;
      const ssize_t n = ::recv(from, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        (i == 0 ? client_open : upstream_open) = false;
        ::shutdown(to, SHUT_WR);
        if (n < 0) return;
        continue;
      }
      if (!write_all(to, buf, size_t(n))) return;
    }
  }
}

void serve(Fd client, sockaddr_in upstream_addr, long delay_ms, std::optional<int> mark) {
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  Fd upstream(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (upstream.get() < 0) return;
  if (mark && ::setsockopt(upstream.get(), SOL_SOCKET, SO_MARK, &*mark, sizeof *mark) != 0) {
    std::perror("delay_proxy: SO_MARK");
    return;
  }
  if (::connect(upstream.get(), reinterpret_cast<const sockaddr*>(&upstream_addr),
                sizeof upstream_addr) != 0)
    return;
  relay(client.get(), upstream.get());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s LISTEN_IP:PORT UPSTREAM_IP:PORT DELAY_MS [MARK]\n", argv[0]);
    return 2;
  }
  const auto listen_addr = parse_endpoint(argv[1]);
  const auto upstream_addr = parse_endpoint(argv[2]);
  char* end = nullptr;
  const long delay_ms = std::strtol(argv[3], &end, 10);
  if (!listen_addr || !upstream_addr || *end != '\0' || delay_ms < 0 || delay_ms > kMaxDelayMs) {
    std::fprintf(stderr,
                 "delay_proxy: bad arguments (endpoints are IPv4:PORT, 0 <= DELAY_MS <= %ld)\n",
                 kMaxDelayMs);
    return 2;
  }
  std::optional<int> mark;
  if (argc == 5) {
    const long m = std::strtol(argv[4], &end, 10);
    if (*end != '\0' || m < 1 || m > 0x7fffffff) {
      std::fprintf(stderr, "delay_proxy: MARK must be 1..2147483647\n");
      return 2;
    }
    mark = int(m);
  }
  ::signal(SIGPIPE, SIG_IGN);

  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&*listen_addr),
             sizeof *listen_addr) != 0 ||
      ::listen(listener.get(), 128) != 0) {
    std::perror("delay_proxy: listen");
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) {
    Fd client(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (client.get() < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      std::perror("delay_proxy: accept");
      return 1;
    }
    // Beyond the limit a connection is closed at once: a stuck client cannot pile up threads.
    if (g_connections.fetch_add(1) >= kMaxConnections) {
      g_connections.fetch_sub(1);
      continue;
    }
    std::thread([c = std::move(client), u = *upstream_addr, delay_ms, mark]() mutable {
      serve(std::move(c), u, delay_ms, mark);
      g_connections.fetch_sub(1);
    }).detach();
  }
}
