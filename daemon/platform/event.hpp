// Event-loop primitives on sd-event: RAII handles, a millisecond timer, a deferred call and the
// loop's clocks. Everything here must only be touched from the loop's own thread.
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "daemon/core/types.hpp"

namespace fo::platform {

using core::Instant;
using core::Millis;

struct EventUnref {
  void operator()(sd_event* e) const { sd_event_unref(e); }
};
using EventPtr = std::unique_ptr<sd_event, EventUnref>;

// disable first: a source still referenced elsewhere (e.g. while it dispatches) must not fire
// again.
struct SourceDisableUnref {
  void operator()(sd_event_source* s) const { sd_event_source_disable_unref(s); }
};
using SourcePtr = std::unique_ptr<sd_event_source, SourceDisableUnref>;

// A fresh (non-default) loop. Throws std::system_error: only used at start-up.
EventPtr make_event();

namespace detail {
class TimerQueue;
}

// One-shot CLOCK_MONOTONIC timer with 1 ms accuracy (accuracy 0 would mean 250 ms of slack).
// All Timers of a loop share one queue, so timers that fall due in the same iteration still
// fire in deadline order (ties: the order they were armed); sd-event alone would dispatch them
// in arbitrary order. A timer armed from a callback fires on a later iteration, never in the
// same pass. The callback may re-arm, disarm or destroy the Timer itself, or other Timers.
class Timer {
 public:
  Timer(sd_event* event, std::function<void()> on_fire);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Re-arming replaces the previous deadline. Negative durations fire on the next iteration.
  void arm_in(Millis delay);
  void disarm();
  bool armed() const { return seq_ != 0; }

 private:
  friend class detail::TimerQueue;

  std::function<void()> on_fire_;
  std::shared_ptr<detail::TimerQueue> queue_;
  uint64_t deadline_usec_ = 0;
  uint64_t seq_ = 0;  // 0 = not armed
};

// Runs a function on a later loop iteration, never synchronously. schedule() while already
// scheduled is a no-op. The callback may schedule again or destroy the Defer.
// Lower priority values run first (sd-event semantics).
class Defer {
 public:
  Defer(sd_event* event, std::function<void()> fn, int64_t priority = SD_EVENT_PRIORITY_NORMAL);
  Defer(const Defer&) = delete;
  Defer& operator=(const Defer&) = delete;

  void schedule();
  void cancel();
  bool scheduled() const;

 private:
  static int dispatch(sd_event_source* s, void* userdata);

  std::function<void()> fn_;
  SourcePtr source_;
};

// Timestamps of the current loop iteration (cheap, and consistent within one iteration).
Instant wall_now(sd_event* event);  // CLOCK_REALTIME, for display and history
Millis mono_now(sd_event* event);   // CLOCK_MONOTONIC, for intervals and deadlines

}  // namespace fo::platform
