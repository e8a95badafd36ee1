// Site state and the postgres step's decision (see pg_state.hpp).
#include "actions/postgres/pg_state.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace fo::actions::pg {

const char* const kStateQuery =
    "SELECT pg_is_in_recovery(), "
    "current_setting('default_transaction_read_only'), "
    "CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn() END, "
    "pg_last_wal_receive_lsn(), "
    "pg_last_wal_replay_lsn(), "
    "CASE WHEN pg_is_in_recovery() THEN NULL "
    "ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END, "
    "(SELECT system_identifier FROM pg_control_system()), "
    "(SELECT status FROM pg_stat_wal_receiver), "
    "(SELECT received_tli FROM pg_stat_wal_receiver), "
    "CASE WHEN pg_is_in_recovery() THEN "
    "extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 END, "
    "CASE WHEN pg_is_in_recovery() THEN pg_is_wal_replay_paused() END";

namespace {

constexpr std::size_t kStateColumns = 11;

std::optional<std::uint32_t> parse_u32(const std::optional<std::string>& text, int base) {
  if (!text || text->empty() || text->size() > 10) return std::nullopt;
  char* end = nullptr;
  const unsigned long v = std::strtoul(text->c_str(), &end, base);
  if (*end != '\0' || v > 0xffffffffUL) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

std::optional<std::uint64_t> lsn_at(const Reply& r, std::size_t col) {
  if (auto v = r.value(0, col)) return parse_lsn(*v);
  return std::nullopt;
}

std::string format_seconds(double s) {
  char buf[32];
  if (s < 1)
    std::snprintf(buf, sizeof buf, "%.0f ms", s * 1000);
  else
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string timeline_text(const std::optional<std::uint32_t>& t) {
  return t ? std::to_string(*t) : "unknown";
}

}  // namespace

std::string format_lsn(std::uint64_t lsn) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%X/%X", static_cast<unsigned>(lsn >> 32),
                static_cast<unsigned>(lsn & 0xffffffffU));
  return buf;
}

std::string SiteState::describe() const {
  if (!reachable) return "unreachable (" + error + ")";
  if (in_recovery) return "a standby";
  return read_only ? "read-only" : "writable";
}

SiteState parse_state(const Reply& r) {
  SiteState s;
  if (!r.ok) {
    s.error = "state query failed: " + r.error;
    // 42501: insufficient privilege (the user is not a superuser): a retry cannot help.
    s.permanent_error = r.sqlstate == "42501";
    return s;
  }
  if (r.rows.size() != 1 || r.rows[0].size() != kStateColumns) {
    s.error = "unexpected reply to the state query";
    return s;
  }
  const auto recovery = r.value(0, 0);
  const auto read_only = r.value(0, 1);
  if (!recovery || !read_only) {
    s.error = "unexpected reply to the state query";
    return s;
  }
  s.reachable = true;
  s.in_recovery = *recovery == "t";
  s.read_only = *read_only == "on";
  s.current = lsn_at(r, 2);
  s.received = lsn_at(r, 3);
  s.replayed = lsn_at(r, 4);
  s.timeline = parse_u32(r.value(0, 5), 16);
  s.system_id = r.value(0, 6).value_or("");
  s.receiver_status = r.value(0, 7).value_or("");
  s.received_tli = parse_u32(r.value(0, 8), 10);
  if (auto age = r.value(0, 9)) s.replay_age = std::strtod(age->c_str(), nullptr);
  s.replay_paused = r.value(0, 10).value_or("f") == "t";
  if (!s.in_recovery && !s.current) {
    s.reachable = false;
    s.error = "primary reported no WAL position";
  }
  return s;
}

Lag standby_lag(const SiteState& target, const SiteState& other, bool time_based) {
  Lag lag;
  if (!target.replayed) {
    lag.text = "unknown (nothing replayed yet)";
    return lag;
  }
  const bool against_primary = other.primary() && other.current;
  const std::uint64_t ahead =
      against_primary ? *other.current : target.received.value_or(*target.replayed);
  lag.known = true;
  lag.bytes = ahead > *target.replayed ? ahead - *target.replayed : 0;
  if (!time_based) {
    lag.text = format_bytes(lag.bytes);
    return lag;
  }
  if (lag.bytes == 0) {
    lag.text = "0 ms";
    return lag;
  }
  if (!target.replay_age) {
    lag.known = false;
    lag.text = "unknown (no transaction replayed since start)";
    return lag;
  }
  lag.seconds = *target.replay_age < 0 ? 0 : *target.replay_age;
  lag.text = format_seconds(lag.seconds);
  return lag;
}

namespace {

Decision refuse(std::string detail, bool retryable) {
  Decision d;
  d.plan = Plan::refuse;
  d.retryable = retryable;
  d.detail = std::move(detail);
  return d;
}

void add_note(Decision& d, const std::string& note) {
  if (!d.notes.empty()) d.notes += "; ";
  d.notes += note;
}

// Applies the lag gate to a promotion; false (d becomes a refusal) when it blocks.
bool pass_gate(Decision& d, const SiteState& target, const SiteState& other,
               const config::PostgresStep& step, bool forced, const std::string& target_name) {
  const bool time_based = step.max_lag_time.count() > 0;
  const Lag lag = standby_lag(target, other, time_based);
  const bool within = lag.known && (time_based ? lag.seconds * 1000 <=
                                                     static_cast<double>(step.max_lag_time.count())
                                               : lag.bytes <= step.max_lag_bytes);
  const std::string measure =
      "lag " + lag.text + (within ? " <= " : " > ") + "max_lag " + step.max_lag;
  if (within) {
    d.detail += (d.detail.empty() ? "" : ", ") + measure;
    return true;
  }
  if (forced) {
    add_note(d, "forced past the lag gate (" + measure + ")");
    return true;
  }
  d = refuse("refused: " + target_name + " replication " + measure +
                 (target.replay_paused ? " (replay is paused)" : "") +
                 "; force the plan to promote anyway",
             false);
  return false;
}

}  // namespace

Decision decide(const SiteState& t, const SiteState& o, const config::PostgresStep& step,
                bool forced, const std::string& tn, const std::string& on) {
  if (!t.reachable) return refuse(tn + " database " + t.describe(), !t.permanent_error);
  if (o.permanent_error) return refuse(on + " database " + o.describe(), false);
  Decision d;
  if (t.primary()) {
    if (!t.read_only) {
      if (!o.writable()) {
        d.plan = Plan::already_done;
        d.detail = tn + " is the writable primary, " + on + " is " + o.describe();
        return d;
      }
      if (step.fence != "read_only")
        return refuse(
            "both writable: split brain, and fence = \"none\" leaves " + on + " to another step",
            false);
      d.plan = Plan::fence_other;
      d.detail = "both writable: split brain";
      return d;
    }
    // The target is a read-only (fenced) primary.
    if (o.writable())
      return refuse(tn + " is a fenced former primary and " + on + " is writable: resynchronise " +
                        tn + " as a standby of " + on + " (pg_rewind) before failing back",
                    false);
    if (o.primary()) {
      if (!(t.timeline && o.timeline && *t.timeline > *o.timeline))
        return refuse("both primaries are read-only and " + tn + "'s timeline (" +
                          timeline_text(t.timeline) + ") is not newer than " + on + "'s (" +
                          timeline_text(o.timeline) + ")",
                      false);
    } else if (!o.reachable) {
      if (!forced)
        return refuse(tn + " is read-only and " + on + " is " + o.describe() +
                          ": cannot tell whether " + on + " serves; force the plan to make " + tn +
                          " writable",
                      false);
      add_note(d, "forced: " + on + " unreachable");
    }
    d.plan = Plan::unfence_target;
    d.detail = tn + " is a read-only primary, " + on + " is " + o.describe();
    return d;
  }
  // The target is a standby.
  d.plan = Plan::promote;
  if (o.primary()) {
    if (!t.system_id.empty() && !o.system_id.empty() && t.system_id != o.system_id)
      return refuse(tn + " and " + on + " are different clusters (system identifier " +
                        t.system_id + " vs " + o.system_id + ")",
                    false);
    const bool streaming = t.receiver_status == "streaming" && t.received_tli && o.timeline &&
                           *t.received_tli == *o.timeline;
    if (!streaming) {
      const std::string why = tn + " is not a streaming standby of " + on + " (wal receiver " +
                              (t.receiver_status.empty() ? "not running" : t.receiver_status) +
                              ", timeline " + timeline_text(t.received_tli) + " vs " +
                              timeline_text(o.timeline) + ")";
      if (!forced) return refuse("refused: " + why, false);
      add_note(d, "forced: " + why);
    }
    d.fence = step.fence == "read_only";
    d.catch_up = true;
    if (!d.fence) add_note(d, on + " is " + o.describe() + ", fence = \"none\"");
  } else if (!o.reachable) {
    add_note(d, on + " " + o.describe() + ": not fenced");
  } else {
    add_note(d, on + " is a standby too");
  }
  d.detail = tn + " is a standby";
  if (!pass_gate(d, t, o, step, forced, tn)) return d;
  return d;
}

std::string drift(const SiteState& t, const SiteState& o, const std::string& tn,
                  const std::string& on) {
  if (t.writable() && o.writable()) return "both writable: split brain";
  if (t.writable()) return "";
  if (o.writable())
    return on + " writable but " + tn + " is active (" + tn + " is " + t.describe() + ")";
  return "no writable database: " + tn + " is " + t.describe() + ", " + on + " is " + o.describe();
}

}  // namespace fo::actions::pg
