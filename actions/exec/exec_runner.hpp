// Runs exec hooks (argv, never a shell) as child processes driven by an sd-event loop:
// security check of the executable, clean environment, own process group, bounded output,
// timeout with SIGTERM then SIGKILL to the whole group, reaping through a pidfd.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/core/types.hpp"

namespace fo::actions {

struct EventSourceDeleter {
  void operator()(sd_event_source* s) const { sd_event_source_disable_unref(s); }
};
using EventSourcePtr = std::unique_ptr<sd_event_source, EventSourceDeleter>;

// sd-event's accuracy 0 means 250 ms of slack; every timer here uses 1 ms.
inline constexpr uint64_t kTimerAccuracyUsec = 1000;

// Hard limits on what a request may ask for (requests come from the operator's config).
inline constexpr std::size_t kMaxArgs = 256;
inline constexpr std::size_t kMaxArgvEnvBytes = 128 * 1024;
inline constexpr std::size_t kMaxOutputCap = 1024 * 1024;
inline constexpr core::Millis kMaxKillGrace{60000};
inline constexpr core::Millis kMaxTimeout{7LL * 24 * 3600 * 1000};
// After the child exits, how long a grandchild may keep the output pipe open.
inline constexpr core::Millis kPipeDrainAfterExit{100};

// The only variable the child inherits besides ExecRequest::env.
inline constexpr const char* kChildPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct ExecRequest {
  std::vector<std::string> argv;  // argv[0]: absolute path of the executable
  std::map<std::string, std::string> env;
  core::Millis timeout{60000};    // > 0 and <= kMaxTimeout, else refused
  std::size_t output_cap = 4096;  // clamped to kMaxOutputCap
  core::Millis kill_grace{2000};  // between SIGTERM and SIGKILL on timeout
};

struct ExecResult {
  enum class Outcome { exited, signaled, timed_out, refused, spawn_failed };
  Outcome outcome = Outcome::spawn_failed;
  int exit_code = -1;
  int signal = 0;
  std::string output;  // first output_cap bytes of stdout+stderr, interleaved
  bool output_truncated = false;
  core::Millis duration{0};
  std::string error;  // human text for non-exited outcomes

  bool ok() const { return outcome == Outcome::exited && exit_code == 0; }
  // "exited 0", "exited 3", "killed by signal 9", "timed out after 2s",
  // "refused: /x is writable by group", "spawn failed: ..."
  std::string summary() const;
};

std::string_view to_string(ExecResult::Outcome o);

class ExecRunner {
 public:
  explicit ExecRunner(sd_event* event);
  // Kills (SIGKILL to the group) and reaps every running child; no callback is invoked.
  ~ExecRunner();
  ExecRunner(const ExecRunner&) = delete;
  ExecRunner& operator=(const ExecRunner&) = delete;

  // Starts the request. `done` is invoked exactly once, always later from the loop (never
  // from inside start()), unless the job is cancelled or the runner destroyed first.
  uint64_t start(ExecRequest request, std::function<void(ExecResult)> done);
  // Kills the job's process group with SIGKILL and drops its callback. The child is still
  // reaped by the loop. Unknown or finished ids are ignored.
  void cancel(uint64_t id);
  // Jobs whose callback is still pending.
  std::size_t running() const;

 private:
  struct Job;
  void try_finish(Job& job);
  void finish(Job& job);

  sd_event* event_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Job>> jobs_;
};

}  // namespace fo::actions
