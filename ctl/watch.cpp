// Watch mode of `failoverctl status` (see watch.hpp).
#include "ctl/watch.hpp"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <ostream>

#include "ctl/render.hpp"
#include "daemon/core/types.hpp"

namespace fo::ctl {
namespace {

using nlohmann::json;

constexpr const char* kHome = "\x1b[H";
constexpr const char* kEraseLine = "\x1b[K";
constexpr const char* kEraseBelow = "\x1b[J";

// format_duration drops fractions of a second; an interval like 1500ms is shown exactly.
std::string interval_text(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? core::format_duration(d) : std::to_string(d.count()) + "ms";
}

std::string header(const WatchOptions& options, int64_t now_ms) {
  return "every " + interval_text(options.interval) + ", updated " + format_utc(now_ms) +
         (options.terminal ? "; Ctrl-C to quit" : "") + "\n\n";
}

// Blocks SIGINT and SIGTERM for the lifetime of the loop, restoring the old mask afterwards.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigprocmask(SIG_BLOCK, &set_, &old_);
  }
  ~BlockedSignals() { sigprocmask(SIG_SETMASK, &old_, nullptr); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

  // True when a signal arrived, or is already pending, within `timeout`.
  bool wait(std::chrono::milliseconds timeout) const {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1000) * 1000000L;
    for (;;) {
      const int sig = sigtimedwait(&set_, nullptr, &ts);
      if (sig > 0) return true;
      if (errno == EAGAIN) return false;
      // EINTR (another signal, e.g. SIGWINCH): wait again; a slightly longer pause is harmless.
    }
  }

 private:
  sigset_t set_{}, old_{};
};

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string watch_frame(const WatchSample& sample, const WatchOptions& options, int64_t now_ms) {
  if (options.json) {
    json line = sample.ok ? sample.arguments : json{{"error", sample.error}, {"ts_ms", now_ms}};
    return line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  }
  std::string body = header(options, now_ms);
  body += sample.ok ? render_status(sample.arguments, now_ms)
                    : "failoverd is unreachable: " + sample.error + "\nasking again in " +
                          interval_text(options.interval) + "\n";
  if (!options.terminal) return body + "\n";
  std::string frame = kHome;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string::npos) end = body.size();
    frame.append(body, start, end - start);
    frame += kEraseLine;
    frame += "\n";
    start = end + 1;
  }
  return frame + kEraseBelow;
}

int run_watch(const WatchOptions& options, const std::function<WatchSample()>& fetch,
              std::ostream& out) {
  BlockedSignals signals;
  if (options.terminal && !options.json) out << kHome << kEraseBelow;
  for (;;) {
    if (signals.wait(std::chrono::milliseconds(0))) break;
    const WatchSample sample = fetch();
    out << watch_frame(sample, options, wall_ms()) << std::flush;
    if (!out) break;  // stdout is gone (closed pipe): nothing left to show
    if (signals.wait(options.interval)) break;
  }
  return 0;
}

}  // namespace fo::ctl
