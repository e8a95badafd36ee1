// Test harness for whole-binary tests: temp dirs, child processes with bounded waits, a
// NOTIFY_SOCKET the test owns, and polling with deadlines instead of sleeps.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace fo::test {

using namespace std::chrono_literals;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fo-it-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
    std::filesystem::permissions(path_, std::filesystem::perms(0755));
  }
  ~TempDir() {
    std::error_code ec;
    if (!std::getenv("FO_KEEP_TMP")) std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& text, int mode = 0644) {
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), mode);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls pred every 20 ms until it holds or the deadline passes.
inline bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

// A child process; killed (SIGKILL) and reaped when the object goes away.
class Process {
 public:
  // stdout goes to output_file; stderr too, unless error_file is given.
  Process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
          const std::string& output_file, const std::string& error_file = "") {
    std::vector<std::string> envs;
    for (char** e = environ; *e; ++e) {
      std::string kv(*e);
      if (!env.count(kv.substr(0, kv.find('=')))) envs.push_back(kv);
    }
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    std::vector<char*> a, e;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    for (const auto& s : envs) e.push_back(const_cast<char*>(s.c_str()));
    e.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    if (error_file.empty())
      posix_spawn_file_actions_adddup2(&fa, 1, 2);
    else
      posix_spawn_file_actions_addopen(&fa, 2, error_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                       0644);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    int r = posix_spawn(&pid_, a[0], &fa, &at, a.data(), e.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (r != 0) throw std::runtime_error("spawn " + argv[0] + ": " + strerror(r));
  }
  ~Process() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { kill(pid_, sig); }
  bool alive() {
    if (pid_ <= 0) return false;
    int st;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      pid_ = -1;
      return false;
    }
    return true;
  }
  // Waits for exit; returns the exit status (or -1 on timeout).
  int wait(std::chrono::milliseconds timeout) {
    if (!wait_until([&] { return !alive(); }, timeout)) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
};

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a command to completion (bounded), capturing stdout and stderr together.
inline RunResult run(const std::vector<std::string>& argv, const TempDir& dir,
                     std::chrono::milliseconds timeout = 10s) {
  static int n = 0;
  const std::string out =
      dir / ("run-" + std::to_string(getpid()) + "-" + std::to_string(++n) + ".out");
  RunResult r;
  {
    Process p(argv, {}, out, out + ".err");
    r.exit_code = p.wait(timeout);
  }
  r.out = read_file(out);
  r.err = read_file(out + ".err");
  return r;
}

// An AF_UNIX datagram socket standing in for systemd's notification socket.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("bind notify socket failed");
  }
  ~NotifySocket() {
    close(fd_);
    unlink(path_.c_str());
  }
  // Reads all datagrams that have arrived so far.
  void drain() {
    char buf[4096];
    for (;;) {
      ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      messages.emplace_back(buf, size_t(n));
    }
  }
  bool saw(const std::string& needle) {
    drain();
    for (const auto& m : messages)
      if (m.find(needle) != std::string::npos) return true;
    return false;
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> messages;

 private:
  std::string path_;
  int fd_ = -1;
};

// Like NotifySocket, but a thread receives continuously and stamps each datagram on arrival,
// so tests can measure the gaps between watchdog pings. Reading continuously matters: like
// systemd, the reader must keep up, or sd_notify() blocks the daemon on a full socket queue.
class TimedNotifySocket {
 public:
  using Clock = std::chrono::steady_clock;
  explicit TimedNotifySocket(const std::string& path) : sock_(path) {
    thread_ = std::thread([this] {
      while (!stop_) {
        std::this_thread::sleep_for(5ms);
        sock_.drain();
        std::lock_guard lock(mu_);
        for (; seen_ < sock_.messages.size(); ++seen_)
          stamped_.push_back({Clock::now(), sock_.messages[seen_]});
      }
    });
  }
  ~TimedNotifySocket() {
    stop_ = true;
    thread_.join();
  }
  std::vector<Clock::time_point> times_of(const std::string& needle) {
    std::lock_guard lock(mu_);
    std::vector<Clock::time_point> out;
    for (const auto& [t, m] : stamped_)
      if (m.find(needle) != std::string::npos) out.push_back(t);
    return out;
  }
  bool saw(const std::string& needle) { return !times_of(needle).empty(); }
  const std::string& path() const { return sock_.path(); }

 private:
  NotifySocket sock_;
  std::mutex mu_;
  size_t seen_ = 0;
  std::vector<std::pair<Clock::time_point, std::string>> stamped_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace fo::test
