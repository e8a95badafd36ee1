// Event-loop primitives on sd-event (see event.hpp).
#include "daemon/platform/event.hpp"

#include <spdlog/spdlog.h>

#include <time.h>

#include <cerrno>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

namespace fo::platform {
namespace {

constexpr uint64_t kTimerAccuracyUsec = 1000;

void check(int rc, const char* what) {
  if (rc < 0) throw std::system_error(-rc, std::generic_category(), what);
}

// Exceptions must not unwind through sd-event's C frames; a throwing callback is a bug, so it
// is logged and the loop goes on.
template <typename Fn>
void run_guarded(const char* what, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    spdlog::error("{} callback threw: {}", what, e.what());
  } catch (...) {
    spdlog::error("{} callback threw a non-std exception", what);
  }
}

}  // namespace

EventPtr make_event() {
  sd_event* e = nullptr;
  check(sd_event_new(&e), "sd_event_new");
  return EventPtr(e);
}

namespace detail {

// The loop's timers in (deadline, arm order) order, behind one sd-event time source that is
// armed at the earliest deadline.
class TimerQueue : public std::enable_shared_from_this<TimerQueue> {
 public:
  static std::shared_ptr<TimerQueue> for_loop(sd_event* event);

  explicit TimerQueue(sd_event* event) : event_(event) {
    sd_event_source* s = nullptr;
    check(sd_event_add_time(event, &s, CLOCK_MONOTONIC, 0, kTimerAccuracyUsec,
                            &TimerQueue::dispatch, this),
          "sd_event_add_time");
    source_.reset(s);
    check(sd_event_source_set_enabled(s, SD_EVENT_OFF), "sd_event_source_set_enabled");
  }
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  void arm(Timer* t, Millis delay) {
    // The clock, not sd_event_now(): that is the time of the loop's last wake-up, stale when
    // a callback ran long (the store flush before a plan) or the loop sat idle, and a timer
    // must never fire before its delay has passed.
    timespec ts{};
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) check(-errno, "clock_gettime");
    const uint64_t now = uint64_t(ts.tv_sec) * 1000000u + uint64_t(ts.tv_nsec) / 1000u;
    const uint64_t delay_usec =
        delay.count() <= 0 ? 0 : static_cast<uint64_t>(delay.count()) * 1000;
    if (t->seq_ != 0) queue_.erase(Key{t->deadline_usec_, t->seq_, t});
    t->deadline_usec_ = now + delay_usec;
    t->seq_ = next_seq_++;
    queue_.insert(Key{t->deadline_usec_, t->seq_, t});
    rearm_source();
  }

  void disarm(Timer* t) {
    if (t->seq_ == 0) return;
    queue_.erase(Key{t->deadline_usec_, t->seq_, t});
    t->seq_ = 0;
    rearm_source();
  }

 private:
  using Key = std::tuple<uint64_t, uint64_t, Timer*>;  // deadline, arm sequence, timer

  static int dispatch(sd_event_source*, uint64_t, void* userdata) {
    static_cast<TimerQueue*>(userdata)->run_due();
    return 0;
  }

  void run_due() {
    // A callback may destroy the last Timer of the loop, and with it this queue.
    const auto keep_alive = shared_from_this();
    uint64_t now = 0;
    sd_event_now(event_, CLOCK_MONOTONIC, &now);
    // Only what is due now; timers armed by these callbacks wait for a later iteration.
    std::vector<Key> due;
    for (const Key& k : queue_) {
      if (std::get<0>(k) > now) break;
      due.push_back(k);
    }
    for (const Key& k : due) {
      // The sequence number is unique, so a Timer disarmed, re-armed or destroyed (its address
      // maybe reused) by an earlier callback is no longer found.
      auto it = queue_.find(k);
      if (it == queue_.end()) continue;
      Timer* t = std::get<2>(k);
      queue_.erase(it);
      t->seq_ = 0;
      auto fn = t->on_fire_;  // a copy: the callback may destroy the Timer that holds it
      run_guarded("timer", fn);
    }
    rearm_source();
  }

  // No exceptions: also runs from ~Timer. Both calls only fail on a source of another
  // process (after fork) or a dead loop.
  void rearm_source() noexcept {
    if (queue_.empty()) {
      sd_event_source_set_enabled(source_.get(), SD_EVENT_OFF);
      return;
    }
    int rc = sd_event_source_set_time(source_.get(), std::get<0>(*queue_.begin()));
    if (rc >= 0) rc = sd_event_source_set_enabled(source_.get(), SD_EVENT_ONESHOT);
    if (rc < 0) spdlog::error("re-arming the timer source failed: {}", rc);
  }

  sd_event* event_;
  std::set<Key> queue_;
  uint64_t next_seq_ = 1;
  SourcePtr source_;
};

namespace {
// sd_event has no user data slot, so queues are found by loop address. Loops may live in
// different threads, hence the mutex; it is only taken when Timers are created or the last
// Timer of a loop goes. Never freed: Timers may outlive static destruction order.
std::mutex registry_mutex;
std::map<sd_event*, std::weak_ptr<TimerQueue>>& registry() {
  static auto* queues = new std::map<sd_event*, std::weak_ptr<TimerQueue>>;
  return *queues;
}
}  // namespace

std::shared_ptr<TimerQueue> TimerQueue::for_loop(sd_event* event) {
  std::lock_guard lock(registry_mutex);
  auto& slot = registry()[event];
  if (auto q = slot.lock()) return q;
  auto q = std::make_shared<TimerQueue>(event);
  slot = q;
  return q;
}

TimerQueue::~TimerQueue() {
  std::lock_guard lock(registry_mutex);
  auto it = registry().find(event_);
  if (it != registry().end() && it->second.expired()) registry().erase(it);
}

}  // namespace detail

Timer::Timer(sd_event* event, std::function<void()> on_fire)
    : on_fire_(std::move(on_fire)), queue_(detail::TimerQueue::for_loop(event)) {}

Timer::~Timer() {
  queue_->disarm(this);
}

void Timer::arm_in(Millis delay) {
  queue_->arm(this, delay);
}

void Timer::disarm() {
  queue_->disarm(this);
}

Defer::Defer(sd_event* event, std::function<void()> fn, int64_t priority) : fn_(std::move(fn)) {
  sd_event_source* s = nullptr;
  check(sd_event_add_defer(event, &s, &Defer::dispatch, this), "sd_event_add_defer");
  source_.reset(s);
  check(sd_event_source_set_enabled(s, SD_EVENT_OFF), "sd_event_source_set_enabled");
  check(sd_event_source_set_priority(s, priority), "sd_event_source_set_priority");
}

void Defer::schedule() {
  check(sd_event_source_set_enabled(source_.get(), SD_EVENT_ONESHOT),
        "sd_event_source_set_enabled");
}

void Defer::cancel() {
  sd_event_source_set_enabled(source_.get(), SD_EVENT_OFF);
}

bool Defer::scheduled() const {
  int enabled = SD_EVENT_OFF;
  return sd_event_source_get_enabled(source_.get(), &enabled) > 0;
}

int Defer::dispatch(sd_event_source*, void* userdata) {
  auto* self = static_cast<Defer*>(userdata);
  auto fn = self->fn_;
  run_guarded("defer", fn);
  return 0;
}

Instant wall_now(sd_event* event) {
  uint64_t usec = 0;
  check(sd_event_now(event, CLOCK_REALTIME, &usec), "sd_event_now");
  return Instant(Millis(static_cast<int64_t>(usec / 1000)));
}

Millis mono_now(sd_event* event) {
  uint64_t usec = 0;
  check(sd_event_now(event, CLOCK_MONOTONIC, &usec), "sd_event_now");
  return Millis(static_cast<int64_t>(usec / 1000));
}

}  // namespace fo::platform
