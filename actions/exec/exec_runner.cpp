// Child process lifecycle for exec hooks on sd-event (see exec_runner.hpp).
#include "actions/exec/exec_runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <system_error>

#include "actions/exec/secure_path.hpp"

namespace fo::actions {
namespace {

using Clock = std::chrono::steady_clock;

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

struct SpawnAttr {
  posix_spawnattr_t attr;
  SpawnAttr() { posix_spawnattr_init(&attr); }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr); }
};

struct SpawnActions {
  posix_spawn_file_actions_t actions;
  SpawnActions() { posix_spawn_file_actions_init(&actions); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions); }
};

uint64_t to_usec(core::Millis ms) {
  return static_cast<uint64_t>(ms.count()) * 1000;
}

std::string errno_text(int err) {
  return std::strerror(err);
}

// Request-level validation; the executable itself is checked by check_executable().
std::string validate(const ExecRequest& req) {
  if (req.argv.empty()) return "empty argv";
  if (req.argv.size() > kMaxArgs)
    return "too many arguments (limit " + std::to_string(kMaxArgs) + ")";
  if (req.timeout.count() <= 0) return "timeout must be positive";
  if (req.timeout > kMaxTimeout) return "timeout above " + core::format_duration(kMaxTimeout);
  std::size_t bytes = 0;
  for (const auto& a : req.argv) {
    if (a.find('\0') != std::string::npos) return "argument contains a NUL byte";
    bytes += a.size() + 1;
  }
  for (const auto& [k, v] : req.env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos) {
      return "invalid environment variable name '" + k + "'";
    }
    if (v.find('\0') != std::string::npos)
      return "environment variable " + k + " contains a NUL byte";
    bytes += k.size() + v.size() + 2;
  }
  if (bytes > kMaxArgvEnvBytes) {
    return "arguments and environment exceed " + std::to_string(kMaxArgvEnvBytes) + " bytes";
  }
  return {};
}

// Ignores ESRCH: the group may be gone already.
void kill_group(pid_t pgid, int sig) {
  if (pgid > 0 && kill(-pgid, sig) != 0 && errno != ESRCH) {
    spdlog::warn("exec: kill(-{}, {}) failed: {}", pgid, sig, errno_text(errno));
  }
}

bool group_exists(pid_t pgid) {
  return pgid > 0 && kill(-pgid, 0) == 0;
}

// Blocking reap after SIGKILL, bounded: used only on paths that cannot wait for the loop.
void reap_now(pid_t pid, int pidfd, core::Millis limit) {
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    auto end = Clock::now() + limit;
    while (true) {
      auto left = std::chrono::duration_cast<core::Millis>(end - Clock::now()).count();
      if (left <= 0) break;
      int r = poll(&p, 1, static_cast<int>(left));
      if (r > 0 || (r < 0 && errno != EINTR)) break;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == 0) {
      spdlog::warn("exec: child {} did not die within {}; left unreaped", pid,
                   core::format_duration(limit));
    }
    return;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::string_view to_string(ExecResult::Outcome o) {
  switch (o) {
    case ExecResult::Outcome::exited:
      return "exited";
    case ExecResult::Outcome::signaled:
      return "signaled";
    case ExecResult::Outcome::timed_out:
      return "timed_out";
    case ExecResult::Outcome::refused:
      return "refused";
    case ExecResult::Outcome::spawn_failed:
      return "spawn_failed";
  }
  return "unknown";
}

std::string ExecResult::summary() const {
  switch (outcome) {
    case Outcome::exited:
      return "exited " + std::to_string(exit_code);
    case Outcome::signaled:
      return "killed by signal " + std::to_string(signal);
    case Outcome::timed_out:
      return error;
    case Outcome::refused:
      return "refused: " + error;
    case Outcome::spawn_failed:
      return "spawn failed: " + error;
  }
  return error;
}

struct ExecRunner::Job {
  ExecRunner* runner = nullptr;
  uint64_t id = 0;
  core::Millis timeout{0};
  core::Millis kill_grace{0};
  std::size_t output_cap = 0;
  std::function<void(ExecResult)> done;
  Clock::time_point started = Clock::now();

  bool prefilled = false;  // result decided before spawning (refused / spawn_failed)
  bool cancelled = false;
  pid_t pid = -1;  // also the process group id
  bool reaped = false;
  int wait_status = 0;
  bool timed_out = false;
  bool killed = false;  // SIGKILL sent to the group after the grace period
  ExecResult result;

  UniqueFd pidfd;
  UniqueFd pipe;
  EventSourcePtr child_src, pipe_src, timeout_src, kill_src, drain_src, defer_src;

  void close_pipe() {
    pipe_src.reset();
    pipe.reset();
    drain_src.reset();
  }

  static int on_defer(sd_event_source*, void* userdata) {
    auto* job = static_cast<Job*>(userdata);
    job->runner->finish(*job);
    return 0;
  }

  static int on_child(sd_event_source*, int, uint32_t, void* userdata) {
    auto* job = static_cast<Job*>(userdata);
    int status = 0;
    pid_t r = waitpid(job->pid, &status, WNOHANG);
    if (r == 0) return 0;  // not yet: pidfd readiness without an exit should not happen
    if (r < 0) {
      if (errno == EINTR) return 0;
      // Someone else reaped our child (a waitpid(-1) elsewhere in the process).
      spdlog::warn("exec: child {} vanished: {}", job->pid, errno_text(errno));
      status = -1;
    }
    job->reaped = true;
    job->wait_status = status;
    job->child_src.reset();
    job->pidfd.reset();
    if (!job->timed_out) job->timeout_src.reset();
    if (job->pipe) {
      // A grandchild may hold the pipe open forever; give it only a short grace.
      sd_event_source* s = nullptr;
      if (sd_event_add_time_relative(job->runner->event_, &s, CLOCK_MONOTONIC,
                                     to_usec(kPipeDrainAfterExit), kTimerAccuracyUsec,
                                     &Job::on_drain, job) >= 0) {
        job->drain_src.reset(s);
      } else {
        job->close_pipe();
      }
    }
    job->runner->try_finish(*job);
    return 0;
  }

  static int on_pipe(sd_event_source*, int fd, uint32_t, void* userdata) {
    auto* job = static_cast<Job*>(userdata);
    char buf[65536];
    // Bounded per dispatch so one chatty child cannot starve the loop; epoll is level-triggered.
    for (int i = 0; i < 16; ++i) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) {
        std::size_t room = job->output_cap - std::min(job->output_cap, job->result.output.size());
        std::size_t keep = std::min(room, static_cast<std::size_t>(n));
        job->result.output.append(buf, keep);
        if (keep < static_cast<std::size_t>(n)) job->result.output_truncated = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return 0;
      job->close_pipe();  // EOF or a read error: either way nothing more will come
      job->runner->try_finish(*job);
      return 0;
    }
    return 0;
  }

  static int on_timeout(sd_event_source*, uint64_t, void* userdata) {
    auto* job = static_cast<Job*>(userdata);
    job->timeout_src.reset();
    job->timed_out = true;
    job->result.error = "timed out after " + core::format_duration(job->timeout);
    kill_group(job->pid, SIGTERM);
    sd_event_source* s = nullptr;
    sd_event* event = job->runner->event_;
    if (sd_event_add_time_relative(event, &s, CLOCK_MONOTONIC, to_usec(job->kill_grace),
                                   kTimerAccuracyUsec, &Job::on_kill, job) >= 0) {
      job->kill_src.reset(s);
    } else {
      kill_group(job->pid, SIGKILL);
      job->killed = true;
    }
    return 0;
  }

  static int on_kill(sd_event_source*, uint64_t, void* userdata) {
    auto* job = static_cast<Job*>(userdata);
    job->kill_src.reset();
    kill_group(job->pid, SIGKILL);
    job->killed = true;
    job->runner->try_finish(*job);
    return 0;
  }

  static int on_drain(sd_event_source*, uint64_t, void* userdata) {
    auto* job = static_cast<Job*>(userdata);
    job->close_pipe();
    job->runner->try_finish(*job);
    return 0;
  }
};

ExecRunner::ExecRunner(sd_event* event) : event_(sd_event_ref(event)) {}

ExecRunner::~ExecRunner() {
  for (auto& [id, job] : jobs_) {
    if (job->pid <= 0) continue;
    if (!job->reaped) {
      kill_group(job->pid, SIGKILL);
      reap_now(job->pid, job->pidfd.get(), core::Millis(5000));
    } else if (job->timed_out && !job->killed) {
      kill_group(job->pid, SIGKILL);
    }
  }
  jobs_.clear();
  sd_event_unref(event_);
}

std::size_t ExecRunner::running() const {
  std::size_t n = 0;
  for (const auto& [id, job] : jobs_) n += job->cancelled ? 0 : 1;
  return n;
}

uint64_t ExecRunner::start(ExecRequest req, std::function<void(ExecResult)> done) {
  const uint64_t id = next_id_++;
  auto job = std::make_unique<Job>();
  job->runner = this;
  job->id = id;
  job->timeout = req.timeout;
  job->kill_grace = std::clamp(req.kill_grace, core::Millis(0), kMaxKillGrace);
  job->output_cap = std::min(req.output_cap, kMaxOutputCap);
  job->done = std::move(done);

  auto deliver_later = [&](ExecResult::Outcome outcome, std::string error) {
    job->prefilled = true;
    job->result.outcome = outcome;
    job->result.error = std::move(error);
    sd_event_source* s = nullptr;
    int r = sd_event_add_defer(event_, &s, &Job::on_defer, job.get());
    if (r < 0) throw std::system_error(-r, std::generic_category(), "sd_event_add_defer");
    job->defer_src.reset(s);
    jobs_.emplace(id, std::move(job));
    return id;
  };

  if (auto bad = validate(req); !bad.empty()) {
    return deliver_later(ExecResult::Outcome::refused, std::move(bad));
  }
  ExecutableCheck exe = check_executable(req.argv.front(), geteuid());
  if (!exe.ok) return deliver_later(ExecResult::Outcome::refused, std::move(exe.reason));

  std::map<std::string, std::string> env_map{{"PATH", kChildPath}};
  for (const auto& [k, v] : req.env) env_map[k] = v;
  std::vector<std::string> env_strings;
  env_strings.reserve(env_map.size());
  for (const auto& [k, v] : env_map) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : req.argv) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return deliver_later(ExecResult::Outcome::spawn_failed, "pipe: " + errno_text(errno));
  }
  UniqueFd rd(fds[0]);
  UniqueFd wr(fds[1]);
  // Only our end is non-blocking: the flag lives on the open file description, and the
  // child must be able to block on a full pipe.
  fcntl(rd.get(), F_SETFL, fcntl(rd.get(), F_GETFL) | O_NONBLOCK);

  SpawnActions fa;
  // dup2 before opening fd 0, in case the write end itself landed on 0..2.
  posix_spawn_file_actions_adddup2(&fa.actions, wr.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa.actions, wr.get(), STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa.actions, 3);
  posix_spawn_file_actions_addchdir_np(&fa.actions, "/");

  SpawnAttr attr;
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  sigset_t all_signals;
  sigfillset(&all_signals);
  posix_spawnattr_setflags(&attr.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr.attr, 0);
  posix_spawnattr_setsigmask(&attr.attr, &empty_mask);
  posix_spawnattr_setsigdefault(&attr.attr, &all_signals);

  pid_t pid = -1;
  int err =
      posix_spawn(&pid, exe.resolved.c_str(), &fa.actions, &attr.attr, argv.data(), envp.data());
  if (err != 0) {
    return deliver_later(ExecResult::Outcome::spawn_failed, exe.resolved + ": " + errno_text(err));
  }
  wr.reset();  // otherwise EOF never comes
  job->pid = pid;
  job->pipe = std::move(rd);
  job->started = Clock::now();

  auto abandon = [&](const char* what, int error) {
    kill_group(pid, SIGKILL);
    reap_now(pid, job->pidfd.get(), core::Millis(5000));
    job->pid = -1;
    job->child_src.reset();
    job->timeout_src.reset();
    job->close_pipe();
    job->pidfd.reset();
    return deliver_later(ExecResult::Outcome::spawn_failed,
                         std::string(what) + ": " + errno_text(error));
  };

  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return abandon("pidfd_open", errno);
  job->pidfd.reset(pidfd);  // the kernel always sets O_CLOEXEC on pidfds

  sd_event_source* s = nullptr;
  int r = sd_event_add_io(event_, &s, pidfd, EPOLLIN, &Job::on_child, job.get());
  if (r < 0) return abandon("sd_event_add_io", -r);
  job->child_src.reset(s);
  r = sd_event_add_io(event_, &s, job->pipe.get(), EPOLLIN, &Job::on_pipe, job.get());
  if (r < 0) return abandon("sd_event_add_io", -r);
  job->pipe_src.reset(s);
  r = sd_event_add_time_relative(event_, &s, CLOCK_MONOTONIC, to_usec(job->timeout),
                                 kTimerAccuracyUsec, &Job::on_timeout, job.get());
  if (r < 0) return abandon("sd_event_add_time_relative", -r);
  job->timeout_src.reset(s);

  spdlog::debug("exec: started {} as pid {} (job {})", req.argv.front(), pid, id);
  jobs_.emplace(id, std::move(job));
  return id;
}

void ExecRunner::cancel(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second->cancelled) return;
  Job& job = *it->second;
  if (job.pid > 0) kill_group(job.pid, SIGKILL);
  if (job.pid <= 0 || job.reaped) {
    jobs_.erase(it);
    return;
  }
  // Keep watching the pidfd so the loop reaps the child; nobody hears about it.
  job.cancelled = true;
  job.done = nullptr;
  job.close_pipe();
  job.timeout_src.reset();
  job.kill_src.reset();
}

void ExecRunner::try_finish(Job& job) {
  if (!job.reaped || job.pipe) return;
  // Leftover group members after a timeout still get their SIGKILL when the grace ends.
  if (job.timed_out && !job.killed && group_exists(job.pid)) return;
  finish(job);
}

void ExecRunner::finish(Job& job) {
  auto it = jobs_.find(job.id);
  if (it == jobs_.end()) return;
  std::unique_ptr<Job> owned = std::move(it->second);
  jobs_.erase(it);
  if (owned->cancelled) return;

  ExecResult result = std::move(owned->result);
  if (!owned->prefilled) {
    const int st = owned->wait_status;
    if (owned->timed_out) {
      result.outcome = ExecResult::Outcome::timed_out;
      if (WIFEXITED(st)) result.exit_code = WEXITSTATUS(st);
      if (WIFSIGNALED(st)) result.signal = WTERMSIG(st);
    } else if (st == -1) {
      result.outcome = ExecResult::Outcome::spawn_failed;
      result.error = "child was reaped by someone else; status unknown";
    } else if (WIFEXITED(st)) {
      result.outcome = ExecResult::Outcome::exited;
      result.exit_code = WEXITSTATUS(st);
    } else {
      result.outcome = ExecResult::Outcome::signaled;
      result.signal = WTERMSIG(st);
      const char* abbrev = sigabbrev_np(result.signal);
      result.error = "killed by signal " + std::to_string(result.signal) +
                     (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
    }
  }
  result.duration = std::chrono::duration_cast<core::Millis>(Clock::now() - owned->started);
  auto done = std::move(owned->done);
  owned.reset();  // releases the sources before user code runs
  if (!done) return;
  try {
    done(std::move(result));
  } catch (const std::exception& e) {
    spdlog::error("exec: completion callback threw: {}", e.what());
  } catch (...) {
    spdlog::error("exec: completion callback threw a non-standard exception");
  }
}

}  // namespace fo::actions
