// The `postgres` step kind (see postgres_step.hpp). One attempt connects to both sites in
// parallel, reads their states (pg_state.hpp), decides, and carries the decision out as a
// chain of queries; every callback comes from the loop and the attempt's own deadline timer
// ends it with timed_out.
#include "actions/postgres/postgres_step.hpp"

#include <algorithm>
#include <string>

#include "actions/postgres/pg_session.hpp"
#include "actions/postgres/pg_state.hpp"
#include "actions/secret_file.hpp"
#include "daemon/platform/event.hpp"

namespace fo::actions {
namespace {

using core::Millis;

constexpr const char* kApplicationName = "failoverd-step";
constexpr Millis kPollEvery{50};
// How long a reload may take to reach our own session, and an unfence to show.
constexpr Millis kSettleLimit{5000};
// Terminating one client backend waits this long for it to exit.
constexpr int kTerminateWaitMs = 2000;
constexpr Millis kMinPromoteReserve{2000};

pg::ConnectParams connect_params(const config::PostgresTarget& t, const std::string& password) {
  pg::ConnectParams p;
  if (!t.conninfo.empty()) {
    p.keywords.emplace_back("dbname", t.conninfo);
    p.expand_dbname = true;
  } else {
    p.keywords.emplace_back("host", t.host);
    p.keywords.emplace_back("port", std::to_string(t.port));
    p.keywords.emplace_back("dbname", t.dbname);
    p.keywords.emplace_back("user", t.user);
  }
  // Later keywords override the conninfo string. GSSAPI would ask a KDC synchronously.
  p.keywords.emplace_back("application_name", kApplicationName);
  p.keywords.emplace_back("gssencmode", "disable");
  if (!password.empty()) p.keywords.emplace_back("password", password);
  return p;
}

std::string plural(long n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

class Attempt final : public StepAttempt {
 public:
  enum class Mode { apply, check, observe };

  Attempt(sd_event* event, const config::Step& step, const StepContext& ctx, Mode mode,
          StepDone done)
      : event_(event),
        spec_(step.postgres),
        timeout_(step.timeout),
        mode_(mode),
        forced_(ctx.forced),
        tn_(core::to_string(ctx.target)),
        on_(core::to_string(ctx.target == core::Site::primary ? core::Site::secondary
                                                              : core::Site::primary)),
        done_(std::move(done)),
        deadline_(event, [this] { on_deadline(); }),
        poll_(event, [this] { on_poll(); }),
        started_(platform::mono_now(event)) {
    const bool target_is_primary = ctx.target == core::Site::primary;
    tcfg_ = target_is_primary ? spec_.primary : spec_.secondary;
    ocfg_ = target_is_primary ? spec_.secondary : spec_.primary;
    deadline_.arm_in(timeout_);
    std::string tpass, opass;
    if (!read_password(tcfg_, tn_, tpass) || !read_password(ocfg_, on_, opass)) return;
    stage_ = "connecting";
    pending_ = 2;
    const Millis connect_limit = std::min(spec_.connect_timeout, timeout_);
    tsess_ = std::make_unique<pg::Session>(
        event_, connect_params(tcfg_, tpass), connect_limit,
        [this](pg::ConnectResult r) { on_connected(true, std::move(r)); });
    osess_ = std::make_unique<pg::Session>(
        event_, connect_params(ocfg_, opass), connect_limit,
        [this](pg::ConnectResult r) { on_connected(false, std::move(r)); });
  }

 private:
  // ---- plumbing -------------------------------------------------------------------------
  Millis elapsed() const { return platform::mono_now(event_) - started_; }
  Millis remaining() const { return std::max(Millis(1), timeout_ - elapsed()); }

  // Ends the attempt; the caller must return right after (the callback may destroy us).
  void finish(StepOutcome o) {
    deadline_.disarm();
    poll_.disarm();
    o.duration = elapsed();
    StepDone done = std::move(done_);
    done_ = nullptr;
    if (done) done(std::move(o));
  }
  void fail(std::string detail, bool retryable = true) {
    finish(StepOutcome::failure(prefix() + detail, retryable));
  }
  // What has already changed, so a failure after the fence says the fence is in place.
  std::string prefix() const { return done_steps_.empty() ? "" : done_steps_ + "; then "; }

  bool read_password(const config::PostgresTarget& t, const std::string& site, std::string& out) {
    if (t.password_file.empty()) return true;
    SecretRead s = read_secret_file(t.password_file);
    if (s.ok) {
      out = s.value.substr(0, s.value.find('\n'));
      return true;
    }
    fail_soon(StepOutcome::failure(site + " password_file: " + s.error, false));
    return false;
  }
  // `done` never runs inside apply(): deliver setup failures from the loop.
  void fail_soon(StepOutcome o) {
    soon_ = std::move(o);
    poll_.arm_in(Millis(0));
  }

  void on_deadline() {
    StepOutcome o;
    o.status = StepOutcome::Status::timed_out;
    o.detail = prefix() + "timeout after " + core::format_duration(timeout_) + " " + stage_;
    tsess_.reset();
    osess_.reset();
    finish(std::move(o));
  }

  void poll_after(Millis delay, std::function<void()> next) {
    poll_next_ = std::move(next);
    poll_.arm_in(delay);
  }
  void on_poll() {
    if (soon_) {
      StepOutcome o = std::move(*soon_);
      soon_.reset();
      return finish(std::move(o));
    }
    std::function<void()> next = std::move(poll_next_);
    poll_next_ = nullptr;
    if (next) next();
  }

  // Runs `sql` on one site; a failed query ends the attempt with `what` in the detail.
  void run(bool on_target, const std::string& sql, const std::string& what,
           std::function<void(const pg::Reply&)> next) {
    pg::Session* s = on_target ? tsess_.get() : osess_.get();
    if (!s) return fail(what + ": " + (on_target ? tn_ : on_) + " not connected");
    s->query(sql, remaining(), [this, on_target, what, next = std::move(next)](pg::Reply r) {
      if (!r.ok)
        return fail(what + " on " + (on_target ? tn_ : on_) + ": " + r.error,
                    r.sqlstate != "42501");
      next(r);
    });
  }

  void read_state(bool on_target, std::function<void(pg::SiteState)> next) {
    pg::Session* s = on_target ? tsess_.get() : osess_.get();
    if (!s) {
      pg::SiteState down;
      down.error = "not connected";
      return next(std::move(down));
    }
    s->query(pg::kStateQuery, remaining(),
             [next = std::move(next)](pg::Reply r) { next(pg::parse_state(r)); });
  }

  // ---- observation ----------------------------------------------------------------------
  void on_connected(bool target, pg::ConnectResult r) {
    if (!r.ok) {
      pg::SiteState& st = target ? tstate_ : ostate_;
      st.error = r.error;
      st.permanent_error = r.permanent;
      (target ? tsess_ : osess_).reset();
      if (--pending_ == 0) on_observed();
      return;
    }
    read_state(target, [this, target](pg::SiteState st) {
      (target ? tstate_ : ostate_) = std::move(st);
      if (!(target ? tstate_ : ostate_).reachable) (target ? tsess_ : osess_).reset();
      if (--pending_ == 0) on_observed();
    });
  }

  void on_observed() {
    if (mode_ == Mode::observe) {
      if (tstate_.permanent_error) return fail(tn_ + " database " + tstate_.describe(), false);
      std::string differs = pg::drift(tstate_, ostate_, tn_, on_);
      if (!differs.empty()) return fail(differs);
      return finish(StepOutcome::success(tn_ + " is the only writable database (" + on_ + " is " +
                                         ostate_.describe() + ")"));
    }
    decision_ = pg::decide(tstate_, ostate_, spec_, forced_, tn_, on_);
    const pg::Decision& d = decision_;
    if (d.plan == pg::Plan::refuse) return fail(d.detail, d.retryable);
    if (mode_ == Mode::check) {
      std::string what = d.plan == pg::Plan::already_done  ? "nothing to do: "
                         : d.plan == pg::Plan::promote     ? "would promote " + tn_ + ": "
                         : d.plan == pg::Plan::fence_other ? "would fence " + on_ + ": "
                                                           : "would make " + tn_ + " writable: ";
      return finish(StepOutcome::success(what + with_notes(d.detail)));
    }
    switch (d.plan) {
      case pg::Plan::already_done:
        return finish(StepOutcome::success(with_notes(d.detail), true));
      case pg::Plan::fence_other:
        return fence([this] { verify_fenced_other(); });
      case pg::Plan::unfence_target:
        return unfence_target([this] {
          finish(StepOutcome::success(tn_ + " made writable (was " + tstate_.describe() + "), " +
                                      on_ + " is " + ostate_.describe() + notes_suffix()));
        });
      case pg::Plan::promote:
        return start_promote();
      case pg::Plan::refuse:
        break;
    }
  }

  std::string with_notes(const std::string& text) const {
    return decision_.notes.empty() ? text : text + "; " + decision_.notes;
  }
  std::string notes_suffix() const { return decision_.notes.empty() ? "" : "; " + decision_.notes; }
  void record(const std::string& what) {
    if (!done_steps_.empty()) done_steps_ += "; ";
    done_steps_ += what;
  }

  // ---- fencing the other site -----------------------------------------------------------
  // read-only for new transactions, every client session but ours ended (a session that set
  // read-write itself, or an open write transaction, would otherwise keep writing), then a
  // CHECKPOINT so that all WAL is flushed and its end is the final position.
  void fence(std::function<void()> next) {
    stage_ = "fencing " + on_;
    run(false, "ALTER SYSTEM SET default_transaction_read_only = on", "fencing",
        [this, next](const pg::Reply&) {
          run(false, "SELECT pg_reload_conf()", "fencing", [this, next](const pg::Reply&) {
            settle_started_ = elapsed();
            wait_setting(false, "on", [this, next] { end_sessions(next); });
          });
        });
  }

  // Polls our own session until the reloaded setting reached it (the postmaster forwards
  // SIGHUP asynchronously).
  void wait_setting(bool on_target, const std::string& want, std::function<void()> next) {
    run(on_target, "SELECT current_setting('default_transaction_read_only')", "checking",
        [this, on_target, want, next](const pg::Reply& r) {
          if (r.value(0, 0).value_or("") == want) return next();
          if (elapsed() - settle_started_ > kSettleLimit)
            return fail(
                std::string(on_target ? tn_ : on_) +
                    " still has default_transaction_read_only = " + r.value(0, 0).value_or("?") +
                    " after the reload (set in postgresql.conf or for the role?)",
                false);
          poll_after(kPollEvery,
                     [this, on_target, want, next] { wait_setting(on_target, want, next); });
        });
  }

  void end_sessions(std::function<void()> next) {
    const std::string sql =
        "SELECT count(*), count(*) FILTER (WHERE NOT pg_terminate_backend(pid, " +
        std::to_string(kTerminateWaitMs) +
        ")) FROM pg_stat_activity WHERE backend_type = 'client backend' "
        "AND pid <> pg_backend_pid()";
    run(false, sql, "ending client sessions", [this, next](const pg::Reply& r) {
      const long ended = std::strtol(r.value(0, 0).value_or("0").c_str(), nullptr, 10);
      const long stuck = std::strtol(r.value(0, 1).value_or("0").c_str(), nullptr, 10);
      fence_text_ = "fenced " + on_ + " (read-only, " + plural(ended, "session") + " ended" +
                    (stuck > 0 ? ", " + std::to_string(stuck) + " still exiting" : "");
      run(false, "CHECKPOINT", "checkpoint", [this, next](const pg::Reply&) {
        run(false, "SELECT pg_current_wal_lsn()", "reading the final WAL position",
            [this, next](const pg::Reply& r2) {
              final_lsn_ = pg::parse_lsn(r2.value(0, 0).value_or(""));
              if (!final_lsn_) return fail("no final WAL position from " + on_);
              fence_text_ += ", final LSN " + pg::format_lsn(*final_lsn_) + ")";
              record(fence_text_);
              next();
            });
      });
    });
  }

  void verify_fenced_other() {
    stage_ = "verifying " + on_ + " is read-only";
    read_state(false, [this](pg::SiteState o) {
      if (!o.reachable) return fail("cannot verify the fence: " + on_ + " " + o.describe());
      if (o.writable()) return fail(on_ + " still writable after fencing", false);
      finish(StepOutcome::success(decision_.detail + ": " + fence_text_ + "; " + tn_ +
                                  " stays the writable primary"));
    });
  }

  // ---- making the target writable -------------------------------------------------------
  void unfence_target(std::function<void()> next) {
    stage_ = "making " + tn_ + " writable";
    run(true, "ALTER SYSTEM RESET default_transaction_read_only", "unfencing",
        [this, next](const pg::Reply&) {
          run(true, "SELECT pg_reload_conf()", "unfencing", [this, next](const pg::Reply&) {
            settle_started_ = elapsed();
            wait_setting(true, "off", next);
          });
        });
  }

  // ---- promotion --------------------------------------------------------------------------
  void start_promote() {
    if (decision_.fence) return fence([this] { wait_catch_up(); });
    if (decision_.catch_up) {
      // fence = "none" and the other site is a reachable primary: another step fenced it.
      stage_ = "reading " + on_ + "'s WAL position";
      return run(false, "SELECT pg_current_wal_lsn()", "reading the WAL position",
                 [this](const pg::Reply& r) {
                   final_lsn_ = pg::parse_lsn(r.value(0, 0).value_or(""));
                   if (!final_lsn_) return fail("no WAL position from " + on_);
                   wait_catch_up();
                 });
    }
    promote();
  }

  // The standby must hold all of the fenced primary's WAL: promotion replays everything
  // received before it ends recovery (even when replay is paused), and verify() checks the
  // new primary's position is past the final one.
  void wait_catch_up() {
    stage_ = "waiting for " + tn_ + " to receive " + on_ + "'s final WAL";
    if (catch_up_limit_.count() == 0) {
      const Millis left = remaining();
      catch_up_limit_ = elapsed() + left - std::max(kMinPromoteReserve, left / 4);
    }
    read_state(true, [this](pg::SiteState t) {
      if (!t.reachable) return fail(tn_ + " " + t.describe() + " while catching up");
      if (!t.in_recovery) return fail(tn_ + " left recovery on its own while catching up", false);
      const std::uint64_t have = std::max(t.received.value_or(0), t.replayed.value_or(0));
      if (have >= *final_lsn_) return promote();
      if (elapsed() >= catch_up_limit_) {
        const std::string gap = tn_ + " has WAL up to " + pg::format_lsn(have) + ", " + on_ +
                                "'s final LSN is " + pg::format_lsn(*final_lsn_);
        if (!forced_) return fail("not caught up in time: " + gap);
        missing_note_ = "forced: promoted without all of " + on_ + "'s WAL (" + gap + ")";
        return promote();
      }
      poll_after(kPollEvery, [this] { wait_catch_up(); });
    });
  }

  void promote() {
    stage_ = "promoting " + tn_;
    const long wait_s = std::clamp<long>((remaining().count() - 1000) / 1000, 1, 3600);
    promote_started_ = elapsed();
    run(true, "SELECT pg_promote(true, " + std::to_string(wait_s) + ")", "pg_promote",
        [this](const pg::Reply& r) {
          if (r.value(0, 0).value_or("") != "t")
            return fail("pg_promote on " + tn_ + " did not finish in time");
          record("promoted " + tn_);
          verify_promoted();
        });
  }

  void verify_promoted() {
    stage_ = "verifying " + tn_;
    read_state(true, [this](pg::SiteState t) {
      if (!t.reachable) return fail("cannot verify: " + tn_ + " " + t.describe());
      if (t.in_recovery) {
        if (elapsed() - promote_started_ > kSettleLimit + kSettleLimit)
          return fail(tn_ + " still in recovery after pg_promote");
        return poll_after(kPollEvery, [this] { verify_promoted(); });
      }
      if (t.read_only) {
        if (unfenced_) return fail(tn_ + " still read-only", false);
        unfenced_ = true;
        return unfence_target([this] { verify_promoted(); });
      }
      if (final_lsn_ && t.current && *t.current < *final_lsn_)
        return fail(tn_ + " is at " + pg::format_lsn(*t.current) + ", before " + on_ +
                        "'s final LSN " + pg::format_lsn(*final_lsn_) + " (WAL lost)",
                    false);
      promoted_ = t;
      if (decision_.fence) return verify_other_after_promote();
      promote_done();
    });
  }

  void verify_other_after_promote() {
    read_state(false, [this](pg::SiteState o) {
      if (o.writable()) return fail(on_ + " writable again after the fence: split brain", false);
      promote_done();
    });
  }

  void promote_done() {
    std::string detail = "promoted " + tn_ + " (timeline " +
                         (promoted_.timeline ? std::to_string(*promoted_.timeline) : "?") + ", " +
                         decision_.detail + ")";
    if (!fence_text_.empty()) detail += "; " + fence_text_;
    if (unfenced_) detail += "; made " + tn_ + " writable";
    if (!decision_.notes.empty()) detail += "; " + decision_.notes;
    if (!missing_note_.empty()) detail += "; " + missing_note_;
    finish(StepOutcome::success(detail));
  }

  sd_event* event_;
  config::PostgresStep spec_;
  config::PostgresTarget tcfg_, ocfg_;
  Millis timeout_;
  Mode mode_;
  bool forced_;
  std::string tn_, on_;
  StepDone done_;
  platform::Timer deadline_;
  platform::Timer poll_;
  Millis started_;
  std::function<void()> poll_next_;
  std::optional<StepOutcome> soon_;
  std::unique_ptr<pg::Session> tsess_, osess_;
  pg::SiteState tstate_, ostate_, promoted_;
  pg::Decision decision_;
  int pending_ = 0;
  std::string stage_ = "starting";
  std::string done_steps_;
  std::string fence_text_;
  std::string missing_note_;
  std::optional<std::uint64_t> final_lsn_;
  Millis settle_started_{0};
  Millis catch_up_limit_{0};
  Millis promote_started_{0};
  bool unfenced_ = false;
};

class PostgresStepPlugin final : public StepPlugin {
 public:
  explicit PostgresStepPlugin(sd_event* event) : event_(event) {}

  std::unique_ptr<StepAttempt> apply(const config::Step& step, const StepContext& ctx,
                                     StepDone done) override {
    return std::make_unique<Attempt>(event_, step, ctx, Attempt::Mode::apply, std::move(done));
  }
  std::unique_ptr<StepAttempt> check(const config::Step& step, const StepContext& ctx,
                                     StepDone done) override {
    return std::make_unique<Attempt>(event_, step, ctx, Attempt::Mode::check, std::move(done));
  }
  std::unique_ptr<StepAttempt> observe(const config::Step& step, const StepContext& ctx,
                                       StepDone done) override {
    return std::make_unique<Attempt>(event_, step, ctx, Attempt::Mode::observe, std::move(done));
  }

 private:
  sd_event* event_;
};

}  // namespace

std::unique_ptr<StepPlugin> make_postgres_step_plugin(sd_event* event) {
  return std::make_unique<PostgresStepPlugin>(event);
}

}  // namespace fo::actions
