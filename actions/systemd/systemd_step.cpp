// The `systemd` step kind (see systemd_step.hpp and docs/steps/systemd.md).
#include "actions/systemd/systemd_step.hpp"

#include <systemd/sd-bus.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "daemon/platform/event.hpp"

namespace fo::actions {
namespace {

using namespace std::chrono_literals;

constexpr const char* kService = "org.freedesktop.systemd1";
constexpr const char* kManagerPath = "/org/freedesktop/systemd1";
constexpr const char* kManager = "org.freedesktop.systemd1.Manager";
constexpr const char* kUnit = "org.freedesktop.systemd1.Unit";
constexpr const char* kProperties = "org.freedesktop.DBus.Properties";
constexpr std::size_t kMaxEarlyJobs = 256;  // JobRemoved signals kept while our call is pending
constexpr std::size_t kMaxText = 160;
constexpr core::Millis kPollFirst{50};
constexpr core::Millis kPollMax{500};

struct BusClose {
  void operator()(sd_bus* b) const {
    sd_bus_detach_event(b);
    sd_bus_close_unref(b);
  }
};
using BusPtr = std::unique_ptr<sd_bus, BusClose>;
struct SlotUnref {
  void operator()(sd_bus_slot* s) const { sd_bus_slot_unref(s); }
};
using SlotPtr = std::unique_ptr<sd_bus_slot, SlotUnref>;
struct MessageUnref {
  void operator()(sd_bus_message* m) const { sd_bus_message_unref(m); }
};
using MessagePtr = std::unique_ptr<sd_bus_message, MessageUnref>;

// Whatever the bus sends is untrusted: bounded and printable before it reaches a detail.
std::string printable(std::string_view text, std::size_t limit = kMaxText) {
  std::string out;
  for (char c : text.substr(0, limit)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  if (text.size() > limit) out += "...";
  return out;
}

bool error_is(const sd_bus_error* e, std::string_view suffix_or_name) {
  return e && e->name && std::string_view(e->name) == suffix_or_name;
}

// A failed bus call as an outcome: errors another attempt cannot fix are not retried.
StepOutcome call_failure(const sd_bus_error* e, const std::string& what,
                         const std::string& address) {
  const std::string name = e && e->name ? e->name : "unknown error";
  const std::string message = e && e->message ? printable(e->message) : "";
  const std::string tail =
      " (" + printable(name, 96) + (message.empty() ? "" : ": " + message) + ")";
  if (error_is(e, "org.freedesktop.systemd1.NoSuchUnit"))
    return StepOutcome::failure(what + ": no such unit" + tail, false);
  if (error_is(e, "org.freedesktop.DBus.Error.AccessDenied") ||
      error_is(e, "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired"))
    return StepOutcome::failure(what + ": access denied" + tail, false);
  if (error_is(e, "org.freedesktop.DBus.Error.ServiceUnknown") ||
      error_is(e, "org.freedesktop.DBus.Error.NameHasNoOwner"))
    return StepOutcome::failure(what + ": systemd is not on the bus at " + address + tail);
  if (error_is(e, "org.freedesktop.systemd1.UnitMasked") ||
      error_is(e, "org.freedesktop.systemd1.JobTypeNotApplicable") ||
      error_is(e, "org.freedesktop.systemd1.OnlyByDependency") ||
      error_is(e, "org.freedesktop.DBus.Error.UnknownMethod") ||
      error_is(e, "org.freedesktop.DBus.Error.UnknownObject") ||
      error_is(e, "org.freedesktop.DBus.Error.UnknownInterface") ||
      error_is(e, "org.freedesktop.DBus.Error.InvalidArgs"))
    return StepOutcome::failure(what + ": refused" + tail, false);
  return StepOutcome::failure(what + ": failed" + tail);
}

bool stopped(const std::string& active_state) {
  return active_state == "inactive" || active_state == "failed";
}

// One attempt of apply, check or observe on its own bus connection. Every step is one async
// call whose reply continues the sequence; the outcome is delivered from a Defer, outside any
// sd-bus dispatch, so `done` may destroy the attempt.
class BusAttempt final : public StepAttempt {
 public:
  enum class Mode { apply, check, observe };

  BusAttempt(sd_event* event, const config::Step& step, Mode mode, StepDone done)
      : event_(event),
        spec_(step.systemd),
        mode_(mode),
        timeout_(step.timeout),
        done_(std::move(done)),
        deadline_(event, [this] { on_deadline(); }),
        poll_(event, [this] { verify(); }),
        deliver_(event, [this] { deliver(); }) {
    system_bus_ = spec_.bus_address.empty();
    address_ = system_bus_ ? system_bus_address() : spec_.bus_address;
    started_ = platform::mono_now(event);
    deadline_.arm_in(timeout_);
    if (connect()) begin();
  }

 private:
  using Continue = std::function<void(sd_bus_message*)>;

  std::string verb() const {
    return spec_.action == "stop"      ? "StopUnit"
           : spec_.action == "restart" ? "RestartUnit"
                                       : "StartUnit";
  }
  std::string wanted_state() const { return spec_.action == "stop" ? "inactive" : "active"; }
  bool in_wanted_state(const std::string& s) const {
    return spec_.action == "stop" ? stopped(s) : s == "active";
  }
  core::Millis elapsed() const { return platform::mono_now(event_) - started_; }
  std::string ms(core::Millis d) const { return std::to_string(d.count()) + " ms"; }

  bool connect() {
    sd_bus* raw = nullptr;
    int r = sd_bus_new(&raw);
    bus_.reset(raw);
    if (r >= 0) r = sd_bus_set_address(raw, address_.c_str());
    if (r >= 0) r = sd_bus_set_bus_client(raw, 1);
    // Non-blocking: a local socket connects at once or fails at once (ENOENT, ECONNREFUSED);
    // authentication and Hello continue on the loop.
    if (r >= 0) r = sd_bus_start(raw);
    if (r >= 0) r = sd_bus_attach_event(raw, event_, SD_EVENT_PRIORITY_NORMAL);
    if (r < 0) {
      finish(StepOutcome::failure(std::string("cannot connect to the ") +
                                  (system_bus_ ? "system bus" : "bus") + " at " +
                                  printable(address_) + ": " + std::strerror(-r)));
      return false;
    }
    return true;
  }

  void begin() {
    // sd-bus synthesizes this local signal when the connection drops; without it a lost bus
    // would only show as the deadline while no call is pending (waiting for JobRemoved).
    sd_bus_slot* lost = nullptr;
    int r = sd_bus_match_signal_async(bus_.get(), &lost, nullptr, "/org/freedesktop/DBus/Local",
                                      "org.freedesktop.DBus.Local", "Disconnected",
                                      &BusAttempt::on_disconnected, nullptr, this);
    lost_slot_.reset(lost);
    if (r < 0)
      return finish(StepOutcome::failure(std::string("cannot watch the bus connection: ") +
                                         std::strerror(-r)));
    if (mode_ != Mode::apply) return load_unit();
    stage_ = "subscribing to systemd's job signals";
    // Installed before the job call on the same connection: the bus daemon sees the match first,
    // so the job's JobRemoved cannot slip past.
    sd_bus_slot* slot = nullptr;
    r = sd_bus_match_signal_async(bus_.get(), &slot, kService, kManagerPath, kManager, "JobRemoved",
                                  &BusAttempt::on_job_removed, &BusAttempt::on_match_installed,
                                  this);
    match_slot_.reset(slot);
    if (r < 0)
      return finish(StepOutcome::failure(std::string("cannot watch jobs: ") + std::strerror(-r)));
    call(kManagerPath, kManager, "Subscribe", nullptr, [this](sd_bus_message*) { load_unit(); });
  }

  // Sends one method call to systemd; `append` adds the arguments; `next` gets the reply.
  void call(const char* path, const char* iface, const char* member,
            const std::function<int(sd_bus_message*)>& append, Continue next) {
    what_ = std::string(member) + " " + spec_.unit;
    sd_bus_message* raw = nullptr;
    int r = sd_bus_message_new_method_call(bus_.get(), &raw, kService, path, iface, member);
    MessagePtr m(raw);
    if (r >= 0 && append) r = append(m.get());
    const core::Millis left = timeout_ - elapsed();
    // A little beyond our own deadline, so the deadline's clearer message wins.
    const uint64_t usec = static_cast<uint64_t>(std::max<int64_t>(left.count(), 1) + 500) * 1000;
    sd_bus_slot* slot = nullptr;
    if (r >= 0)
      r = sd_bus_call_async(bus_.get(), &slot, m.get(), &BusAttempt::on_reply, this, usec);
    call_slot_.reset(slot);
    if (r < 0)
      return finish(StepOutcome::failure("cannot send " + what_ + ": " + std::strerror(-r)));
    next_ = std::move(next);
  }

  static int on_reply(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<BusAttempt*>(userdata);
    self->call_slot_.reset();  // sd-bus holds its own reference while we run
    Continue next = std::move(self->next_);
    if (self->finished_) return 0;
    if (const sd_bus_error* e = sd_bus_message_get_error(m)) {
      // Subscribing twice is harmless (older systemd reports it as an error).
      if (error_is(e, "org.freedesktop.systemd1.AlreadySubscribed")) {
        next(m);
        return 0;
      }
      self->finish(call_failure(e, self->what_, self->address_));
      return 0;
    }
    next(m);
    return 0;
  }

  static int on_match_installed(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<BusAttempt*>(userdata);
    if (const sd_bus_error* e = sd_bus_message_get_error(m); e && !self->finished_)
      self->finish(call_failure(e, "AddMatch JobRemoved", self->address_));
    return 0;
  }

  static int on_disconnected(sd_bus_message*, void* userdata, sd_bus_error*) {
    auto* self = static_cast<BusAttempt*>(userdata);
    self->finish(StepOutcome::failure("lost the connection to the bus at " +
                                      printable(self->address_) + " while " + self->stage_));
    return 0;
  }

  static int on_job_removed(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<BusAttempt*>(userdata);
    uint32_t id = 0;
    const char* job = nullptr;
    const char* unit = nullptr;
    const char* result = nullptr;
    if (self->finished_ || sd_bus_message_read(m, "uoss", &id, &job, &unit, &result) < 0)
      return 0;  // a malformed signal is not ours
    if (self->job_path_.empty()) {
      // Our job call has not answered yet: the job may already be over (a fast job).
      if (self->early_jobs_.size() < kMaxEarlyJobs) self->early_jobs_[job] = result;
    } else if (self->job_path_ == job) {
      self->job_finished(result);
    }
    return 0;
  }

  void load_unit() {
    stage_ = "loading " + spec_.unit;
    call(
        kManagerPath, kManager, "LoadUnit",
        [this](sd_bus_message* m) { return sd_bus_message_append(m, "s", spec_.unit.c_str()); },
        [this](sd_bus_message* reply) {
          const char* path = nullptr;
          if (sd_bus_message_read(reply, "o", &path) < 0)
            return finish(StepOutcome::failure("unexpected reply to " + what_));
          unit_path_ = path;
          get_property("LoadState", [this](std::string load) {
            load_state_ = std::move(load);
            get_property("ActiveState", [this](std::string active) { decide(active); });
          });
        });
  }

  void get_property(const char* name, std::function<void(std::string)> next) {
    call(
        unit_path_.c_str(), kProperties, "Get",
        [name](sd_bus_message* m) { return sd_bus_message_append(m, "ss", kUnit, name); },
        [this, name, next = std::move(next)](sd_bus_message* reply) {
          const char* value = nullptr;
          if (sd_bus_message_read(reply, "v", "s", &value) < 0 || !value)
            return finish(StepOutcome::failure("unexpected reply to Get " + std::string(name) +
                                               " of " + spec_.unit));
          next(printable(value, 64));
        });
  }

  void decide(const std::string& active) {
    const std::string unit = spec_.unit;
    if (load_state_ == "not-found")
      return finish(StepOutcome::failure("unit " + unit + " not found", false));
    if (mode_ == Mode::check) {
      if (load_state_ != "loaded")
        return finish(StepOutcome::failure(unit + " is " + load_state_ + ", not loaded", false));
      return finish(StepOutcome::success(unit + " is loaded (ActiveState " + active + ")"));
    }
    if (mode_ == Mode::observe) {
      if (in_wanted_state(active)) return finish(StepOutcome::success(unit + " is " + active));
      return finish(StepOutcome::failure(unit + " is " + active + ", expected " + wanted_state()));
    }
    if (spec_.action != "stop" && load_state_ != "loaded")
      return finish(StepOutcome::failure(unit + " is " + load_state_ + ", not loaded", false));
    if (spec_.action != "restart" && in_wanted_state(active))
      return finish(StepOutcome::success(unit + " already " + active, true));
    start_job();
  }

  void start_job() {
    stage_ = "waiting for the reply to " + verb() + " " + spec_.unit;
    call(
        kManagerPath, kManager, verb().c_str(),
        [this](sd_bus_message* m) {
          return sd_bus_message_append(m, "ss", spec_.unit.c_str(), spec_.mode.c_str());
        },
        [this](sd_bus_message* reply) {
          const char* job = nullptr;
          if (sd_bus_message_read(reply, "o", &job) < 0 || !job || !*job)
            return finish(StepOutcome::failure("unexpected reply to " + what_));
          job_path_ = job;
          stage_ = "waiting for job " + printable(job_path_, 96) + " (" + spec_.action + " " +
                   spec_.unit + ")";
          if (auto it = early_jobs_.find(job_path_); it != early_jobs_.end())
            return job_finished(it->second);
          early_jobs_.clear();
        });
  }

  void job_finished(const std::string& result) {
    if (result != "done") {
      // "invalid" and "unsupported" describe the request itself; the rest may pass later.
      const bool retryable = result != "invalid" && result != "unsupported";
      return finish(StepOutcome::failure(spec_.action + " job for " + spec_.unit +
                                             " finished with result '" + printable(result, 32) +
                                             "'",
                                         retryable));
    }
    stage_ = "verifying ActiveState of " + spec_.unit;
    poll_delay_ = kPollFirst;
    verify();
  }

  void verify() {
    get_property("ActiveState", [this](std::string active) {
      last_active_ = active;
      if (in_wanted_state(active))
        return finish(StepOutcome::success(
            spec_.unit + " " + spec_.action + (spec_.action == "stop" ? "ped" : "ed") +
            ": job done, ActiveState " + active + " after " + ms(elapsed())));
      // A job that is done normally leaves the wanted state; a unit that flips back at once
      // (a crashing service) is watched until the deadline.
      stage_ =
          "verifying " + spec_.unit + ": ActiveState " + active + ", expected " + wanted_state();
      poll_.arm_in(poll_delay_);
      poll_delay_ = std::min(poll_delay_ * 2, kPollMax);
    });
  }

  void on_deadline() {
    if (finished_) return;
    StepOutcome o;
    o.status = StepOutcome::Status::timed_out;
    o.detail = "timed out after " + ms(timeout_) + " " + stage_;
    finish(std::move(o));
  }

  void finish(StepOutcome outcome) {
    if (finished_) return;
    finished_ = true;
    outcome.duration = elapsed();
    outcome_ = std::move(outcome);
    deadline_.disarm();
    poll_.disarm();
    deliver_.schedule();
  }

  void deliver() {
    StepDone done = std::move(done_);
    StepOutcome outcome = std::move(*outcome_);
    done(std::move(outcome));  // may destroy *this
  }

  sd_event* event_;
  config::SystemdStep spec_;
  Mode mode_;
  core::Millis timeout_;
  StepDone done_;
  bool system_bus_ = true;
  std::string address_;
  core::Millis started_{0};
  std::string stage_ = "connecting";
  std::string what_;
  std::string unit_path_;
  std::string load_state_;
  std::string last_active_;
  std::string job_path_;
  std::map<std::string, std::string> early_jobs_;
  core::Millis poll_delay_ = kPollFirst;
  bool finished_ = false;
  std::optional<StepOutcome> outcome_;
  Continue next_;
  platform::Timer deadline_;
  platform::Timer poll_;
  platform::Defer deliver_;
  // The bus before its slots: slots reference the bus and are released first.
  BusPtr bus_;
  SlotPtr lost_slot_;
  SlotPtr match_slot_;
  SlotPtr call_slot_;
};

class SystemdPlugin final : public StepPlugin {
 public:
  explicit SystemdPlugin(sd_event* event) : event_(event) {}

  std::unique_ptr<StepAttempt> apply(const config::Step& step, const StepContext& ctx,
                                     StepDone done) override {
    (void)ctx;
    return std::make_unique<BusAttempt>(event_, step, BusAttempt::Mode::apply, std::move(done));
  }
  std::unique_ptr<StepAttempt> check(const config::Step& step, const StepContext& ctx,
                                     StepDone done) override {
    (void)ctx;
    return std::make_unique<BusAttempt>(event_, step, BusAttempt::Mode::check, std::move(done));
  }
  std::unique_ptr<StepAttempt> observe(const config::Step& step, const StepContext& ctx,
                                       StepDone done) override {
    (void)ctx;
    return std::make_unique<BusAttempt>(event_, step, BusAttempt::Mode::observe, std::move(done));
  }

 private:
  sd_event* event_;
};

}  // namespace

std::string system_bus_address() {
  if (const char* env = secure_getenv("DBUS_SYSTEM_BUS_ADDRESS"); env && *env) return env;
  return "unix:path=/run/dbus/system_bus_socket";
}

std::unique_ptr<StepPlugin> make_systemd_step_plugin(sd_event* event) {
  return std::make_unique<SystemdPlugin>(event);
}

}  // namespace fo::actions
