// Test helper: real servers (named, postgres) as child processes of the test. Each child gets
// PR_SET_PDEATHSIG, so it dies with the test binary even when the test crashes; stop() and
// the destructor end it with a bounded wait.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fo::test {

// The account to run a server as; uid -1 means "as the test itself" (not root).
struct RunAs {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  static RunAs user(const std::string& name) {
    if (geteuid() != 0) return {};
    const passwd* pw = getpwnam(name.c_str());
    if (!pw) throw std::runtime_error("user " + name + " does not exist");
    return {pw->pw_uid, pw->pw_gid};
  }
};

class Child {
 public:
  Child() = default;
  // Starts argv[0] (absolute path) with `env`, stdout and stderr appended to `log`.
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env,
        const std::string& log, RunAs as = {}) {
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) throw std::runtime_error("cannot open " + log);
    if (as.uid != static_cast<uid_t>(-1) && fchown(log_fd, as.uid, as.gid) != 0) {
      ::close(log_fd);
      throw std::runtime_error("cannot chown " + log);
    }
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      ::close(log_fd);
      throw std::runtime_error("fork failed");
    }
    if (pid_ == 0) {
      // Only async-signal-safe calls from here on.
      const int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
        _exit(126);
      if (as.uid != static_cast<uid_t>(-1)) {
        if (setgroups(0, nullptr) != 0 || setgid(as.gid) != 0 || setuid(as.uid) != 0) _exit(126);
      }
      // After setuid: a credential change clears the parent-death signal.
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(126);
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    ::close(log_fd);
  }
  Child(Child&& o) noexcept : pid_(o.pid_), status_(o.status_) { o.pid_ = -1; }
  Child& operator=(Child&& o) noexcept {
    if (this != &o) {
      stop(SIGKILL, std::chrono::seconds(5));
      pid_ = o.pid_;
      status_ = o.status_;
      o.pid_ = -1;
    }
    return *this;
  }
  ~Child() { stop(SIGKILL, std::chrono::seconds(5)); }

  pid_t pid() const { return pid_; }
  bool running() {
    if (pid_ < 0) return false;
    if (waitpid(pid_, &status_, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }
  // Waits for the exit, up to `limit`; true if it exited (status in exit_code()).
  bool wait(std::chrono::milliseconds limit) {
    if (pid_ < 0) return true;
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(limit.count()));
      ::close(pidfd);
    }
    return !running();
  }
  // Sends `sig`, waits up to `grace`, then SIGKILL. Returns whether it exited within grace.
  bool stop(int sig, std::chrono::milliseconds grace) {
    if (pid_ < 0) return true;
    ::kill(pid_, sig);
    if (wait(grace)) return true;
    ::kill(pid_, SIGKILL);
    wait(std::chrono::seconds(10));
    return false;
  }
  int exit_code() const { return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1; }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
};

// Runs a command to completion within `limit`; returns its exit code (-1: killed or timed out).
inline int run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::string& log, RunAs as, std::chrono::milliseconds limit) {
  Child c(argv, env, log, as);
  if (!c.wait(limit)) return -1;
  return c.exit_code();
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A private directory, removed with everything in it at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "fo-probes") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string write(const std::string& name, const std::string& content, mode_t mode = 0644) {
    const std::string p = file(name);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
    std::filesystem::permissions(p, static_cast<std::filesystem::perms>(mode));
    return p;
  }

 private:
  std::string path_;
};

}  // namespace fo::test
