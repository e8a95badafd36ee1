// Control-socket commands of the daemon (docs/control-protocol.md). Reads are open to whoever
// can connect to the socket (its mode and group decide); changes need root, the daemon's own
// user, or membership of the group failoverd-admin. Every change is recorded with the peer uid.
#include <grp.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <ctime>
#include <limits>
#include <thread>
#include <vector>

#include "daemon/control/protocol.hpp"
#include "daemon/daemon.hpp"
#include "daemon/daemon_group.hpp"

namespace fo {

using core::Phase;
using core::Site;
using nlohmann::json;

namespace {

constexpr const char* kAdminGroup = "failoverd-admin";

json opt_ms(const std::optional<core::Instant>& t) {
  return t ? json(core::to_ms(*t)) : json(nullptr);
}

json site_json(const core::SiteHealth& h, bool have_round) {
  json j;
  j["health"] = have_round && h.known ? json(h.ratio()) : json(nullptr);
  j["healthy"] = h.healthy;
  j["reporting"] = h.reporting;
  j["configured"] = h.configured;
  j["known"] = have_round && h.known;
  j["locations"] = json::array();
  for (const auto& l : h.locations)
    j["locations"].push_back({{"name", l.location},
                              {"verdict", std::string(core::to_string(l.verdict))},
                              {"last_ms", opt_ms(l.last_result)}});
  return j;
}

json plan_json(const config::Group& g, Phase phase) {
  json steps = json::array();
  size_t i = 0;
  for (const auto& s : g.steps_for(phase))
    steps.push_back({{"index", i++},
                     {"name", s.name},
                     {"kind", s.kind},
                     {"argv", s.argv},
                     {"timeout_ms", s.timeout.count()},
                     {"retries", s.retries},
                     {"on_failure", s.abort_on_failure ? "abort" : "continue"}});
  const bool back = phase == Phase::failback;
  return {{"group", g.name},
          {"phase", std::string(core::to_string(phase))},
          {"steps", steps},
          {"from", back ? "secondary" : "primary"},
          {"to", back || phase == Phase::cool ? "primary" : "secondary"}};
}

// Typed argument access: absent -> fallback; wrong type -> error text.
template <typename T>
bool arg(const json& args, const char* key, T& out, std::string& error) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return true;
  try {
    out = it->get<T>();
    return true;
  } catch (const json::exception&) {
    error = std::string("argument '") + key + "' has the wrong type";
    return false;
  }
}

// Every point in time "<name>_ms" gets an ISO-8601 twin "<name>" (docs/control-protocol.md).
bool is_time_key(const std::string& k) {
  return k == "ts_ms" || k == "since_ms" || k == "started_ms" || k == "ended_ms" || k == "last_ms";
}

void add_iso_times(json& j) {
  if (j.is_array()) {
    for (auto& e : j) add_iso_times(e);
    return;
  }
  if (!j.is_object()) return;
  std::vector<std::pair<std::string, json>> twins;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (is_time_key(k) && it->is_number_integer() && it->get<int64_t>() > 0) {
      const int64_t ms = it->get<int64_t>();
      std::time_t secs = static_cast<std::time_t>(ms / 1000);
      std::tm tm{};
      gmtime_r(&secs, &tm);
      char buf[96];
      std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms % 1000));
      twins.emplace_back(k.substr(0, k.size() - 3), buf);
    } else if (is_time_key(k) && it->is_null()) {
      twins.emplace_back(k.substr(0, k.size() - 3), nullptr);
    } else {
      add_iso_times(*it);
    }
  }
  for (auto& [k, v] : twins)
    if (!j.contains(k)) j[k] = std::move(v);
}

}  // namespace

bool Daemon::may_change(const control::Peer& peer) const {
  if (peer.uid == 0 || peer.uid == geteuid()) return true;
  const group* admin = getgrnam(kAdminGroup);
  if (!admin) return false;
  if (peer.gid == admin->gr_gid) return true;
  const passwd* pw = getpwuid(peer.uid);
  if (!pw) return false;
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) return false;
  }
  groups.resize(n);
  for (gid_t g : groups)
    if (g == admin->gr_gid) return true;
  return false;
}

json Daemon::handle(const control::Request& r) {
  json out = dispatch(r);
  if (out.contains("arguments")) add_iso_times(out["arguments"]);
  return out;
}

json Daemon::dispatch(const control::Request& r) {
  try {
    if (r.command == "status") return handle_status();
    if (r.command == "history") return handle_history(r.arguments);
    if (r.command == "plan") return handle_plan(r.arguments);
    if (r.command == "version")
      return control::reply(
          control::kResultSuccess, "failoverd " FAILOVERD_VERSION,
          {{"version", FAILOVERD_VERSION}, {"protocol", control::kProtocolVersion}});
    if (r.command == "failover") return handle_command(r, core::Command::failover);
    if (r.command == "failback") return handle_command(r, core::Command::failback);
    if (r.command == "hold") return handle_command(r, core::Command::hold);
    if (r.command == "release") return handle_command(r, core::Command::release);
    if (r.command == "debug_stall" && options_.debug_commands) {
      // Deliberately blocks the loop: probes, rounds and watchdog pings all stop meanwhile.
      if (!may_change(r.peer)) return control::reply(control::kResultDenied, "permission denied");
      int64_t ms = 0;
      std::string error;
      if (!arg(r.arguments, "ms", ms, error) || ms < 0 || ms > 60000)
        return control::reply(control::kResultBadRequest, "ms must be 0..60000");
      spdlog::warn("control: debug_stall: blocking the event loop for {} ms", ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return control::reply(control::kResultSuccess, "stalled for " + std::to_string(ms) + " ms");
    }
  } catch (const std::exception& e) {
    spdlog::error("control: {} failed: {}", r.command, e.what());
    return control::reply(control::kResultError, r.command + " failed: " + e.what());
  }
  return control::reply(control::kResultUnsupported, "unknown command '" + r.command + "'");
}

// Per location: its latest verdict for each site, whether it is stale (no fresh result for
// either site), and for agents what went wrong last (backoff, bad reply, ...).
json Daemon::locations_json(const Group& g) const {
  json out = json::array();
  for (const auto& name : g.cfg.locations) {
    const config::Location* loc = config_.find_location(name);
    json l = {{"name", name},
              {"kind", loc && loc->kind == config::LocationKind::agent ? "agent" : "local"}};
    std::optional<core::Instant> last;
    bool fresh = false;
    for (const auto* site : {&g.primary, &g.secondary}) {
      std::string verdict = "missing";
      for (const auto& v : site->locations) {
        if (v.location != name) continue;
        verdict = std::string(core::to_string(v.verdict));
        fresh = fresh || v.verdict != core::Verdict::missing;
        if (v.last_result && (!last || *v.last_result > *last)) last = v.last_result;
      }
      l[site == &g.primary ? "primary" : "secondary"] =
          g.have_round ? json(verdict) : json(nullptr);
    }
    l["last_ms"] = last ? json(core::to_ms(*last)) : json(nullptr);
    l["stale"] = g.have_round && !fresh;
    std::string detail;
    if (auto it = agents_.find(name);
        it != agents_.end() && loc && loc->kind == config::LocationKind::agent)
      detail = it->second->status();
    l["detail"] = detail;
    out.push_back(std::move(l));
  }
  return out;
}

json Daemon::handle_status() {
  json groups = json::array();
  for (const auto& [name, g] : groups_) {
    const auto& s = g->state;
    json plan = nullptr;
    if (s.plan_phase)
      plan = {{"phase", std::string(core::to_string(*s.plan_phase))},
              {"id", s.plan_id},
              {"initiator", std::string(core::to_string(s.plan_initiator))}};
    json entry = {{"name", name},
                  {"state", std::string(core::to_string(s.state))},
                  {"active", std::string(core::to_string(s.active))},
                  {"since_ms", core::to_ms(s.since)},
                  {"reason", g->reason},
                  {"secondary_warm", s.secondary_warm},
                  {"held_reason", s.held_reason},
                  {"plan", plan},
                  {"rounds_below", s.rounds_below},
                  {"rounds", g->rounds},
                  {"primary", site_json(g->primary, g->have_round)},
                  {"secondary", site_json(g->secondary, g->have_round)}};
    // Latest probe detail per location, so an operator sees why a location is unhealthy.
    for (const char* site_name : {"primary", "secondary"}) {
      const int site = std::string(site_name) == "primary" ? 0 : 1;
      for (auto& loc : entry[site_name]["locations"]) {
        json probes_j = json::array();
        for (const auto& [key, res] : g->last_results) {
          if (std::get<0>(key) != site || std::get<1>(key) != loc["name"].get<std::string>())
            continue;
          probes_j.push_back({{"name", std::get<2>(key)},
                              {"ok", res.ok},
                              {"latency_ms", res.latency_ms},
                              {"error", res.error}});
        }
        loc["probes"] = probes_j;
      }
    }
    entry["locations"] = locations_json(*g);
    entry["late_results"] = g->late_results;
    entry["skipped_checks"] = g->skipped_checks;
    groups.push_back(entry);
  }
  const auto st = store_->stats();
  json daemon = {{"version", FAILOVERD_VERSION},
                 {"pid", getpid()},
                 {"started_ms", core::to_ms(started_)},
                 {"config", options_.config_path},
                 {"store",
                  {{"queue_depth", st.queue_depth},
                   {"written", st.written},
                   {"write_errors", st.write_errors},
                   {"dropped_rounds", st.dropped_rounds}}}};
  return control::reply(control::kResultSuccess, std::to_string(groups.size()) + " group(s)",
                        {{"daemon", daemon}, {"groups", groups}});
}

json Daemon::handle_history(const json& args) {
  std::string group, kind = "transitions", error;
  int64_t limit = 50, since = 0, until = std::numeric_limits<int64_t>::max();
  if (!arg(args, "group", group, error) || !arg(args, "kind", kind, error) ||
      !arg(args, "limit", limit, error) || !arg(args, "since_ms", since, error) ||
      !arg(args, "until_ms", until, error))
    return control::reply(control::kResultBadRequest, error);
  if (limit < 1 || limit > 10000)
    return control::reply(control::kResultBadRequest, "limit must be between 1 and 10000");
  if (!group.empty() && !groups_.count(group) && !config_.find_group(group))
    return control::reply(control::kResultError, "no group named '" + group + "'");
  json out = json::array();
  const size_t n = size_t(limit);
  if (kind == "transitions") {
    for (const auto& t : store_->transitions(group, since, until, n))
      out.push_back({{"ts_ms", t.ts_ms},
                     {"group", t.group},
                     {"from", t.from},
                     {"to", t.to},
                     {"reason", t.reason},
                     {"initiator", t.initiator},
                     {"uid", t.uid ? json(*t.uid) : json(nullptr)},
                     {"term", t.term},
                     {"active", t.active}});
  } else if (kind == "actions") {
    for (const auto& a : store_->actions(group, since, until, n))
      out.push_back({{"group", a.group},
                     {"plan_id", a.plan_id},
                     {"phase", a.phase},
                     {"step_index", a.step_index},
                     {"step_name", a.step_name},
                     {"kind", a.kind},
                     {"attempt", a.attempt},
                     {"started_ms", a.started_ms},
                     {"ended_ms", a.ended_ms},
                     {"result", a.result},
                     {"exit_code", a.exit_code},
                     {"output", a.output},
                     {"initiator", a.initiator}});
  } else if (kind == "rounds") {
    auto rounds = store_->rounds(group, since, until, n);
    for (const auto& r : rounds)
      out.push_back({{"ts_ms", r.ts_ms},
                     {"group", r.group},
                     {"state", r.state},
                     {"primary",
                      {{"healthy", r.p_healthy},
                       {"reporting", r.p_reporting},
                       {"configured", r.p_configured},
                       {"known", r.p_known},
                       {"locations", r.p_locations}}},
                     {"secondary",
                      {{"healthy", r.s_healthy},
                       {"reporting", r.s_reporting},
                       {"configured", r.s_configured},
                       {"known", r.s_known},
                       {"locations", r.s_locations}}}});
  } else if (kind == "commands") {
    for (const auto& c : store_->commands(group, since, until, n))
      out.push_back({{"ts_ms", c.ts_ms},
                     {"group", c.group},
                     {"command", c.command},
                     {"uid", c.uid ? json(*c.uid) : json(nullptr)},
                     {"arguments", c.arguments},
                     {"result", c.result}});
  } else {
    return control::reply(control::kResultBadRequest,
                          "kind must be transitions, actions, rounds or commands");
  }
  const size_t count = out.size();
  return control::reply(control::kResultSuccess, std::to_string(count) + " " + kind,
                        {{kind, std::move(out)}});
}

json Daemon::handle_plan(const json& args) {
  std::string group, phase, error;
  if (!arg(args, "group", group, error) || !arg(args, "phase", phase, error))
    return control::reply(control::kResultBadRequest, error);
  auto it = groups_.find(group);
  if (it == groups_.end())
    return control::reply(control::kResultError, "no group named '" + group + "'");
  auto p = core::phase_from_string(phase);
  if (!p)
    return control::reply(control::kResultBadRequest,
                          "phase must be warm, failover, failback or cool");
  return control::reply(control::kResultSuccess, "plan of " + group,
                        plan_json(it->second->cfg, *p));
}

json Daemon::handle_command(const control::Request& r, core::Command c) {
  const std::string verb(core::to_string(c));
  std::string group, reason, error;
  bool force = false;
  if (!arg(r.arguments, "group", group, error) || !arg(r.arguments, "reason", reason, error) ||
      !arg(r.arguments, "force", force, error))
    return control::reply(control::kResultBadRequest, error);
  if (group.empty())
    return control::reply(control::kResultBadRequest, "argument 'group' is required");
  if (reason.size() > 1024)
    return control::reply(control::kResultBadRequest, "reason is longer than 1024 bytes");
  const int64_t ts = core::to_ms(now());
  auto record = [&](const std::string& result) {
    store_->record_command({ts, group, verb, r.peer.uid, r.arguments.dump(), result});
  };
  if (!may_change(r.peer)) {
    const std::string text = "permission denied: uid " + std::to_string(r.peer.uid) + " may not " +
                             verb + " (needs root or group " + kAdminGroup + ")";
    record(text);
    spdlog::warn("control: {}", text);
    return control::reply(control::kResultDenied, text);
  }
  auto it = groups_.find(group);
  if (it == groups_.end()) {
    record("no such group");
    return control::reply(control::kResultError, "no group named '" + group + "'");
  }
  Group& g = *it->second;
  core::CommandInput in{
      now(), c, force, g.primary, g.secondary, "uid=" + std::to_string(r.peer.uid), reason};
  core::Decision d = core::apply_command(g.state, in, g.cfg.policy);
  if (!d.accepted) {
    record("refused: " + d.reason);
    spdlog::info("control: {} {} refused: {}", verb, group, d.reason);
    return control::reply(control::kResultRefused, verb + " of " + group + " refused: " + d.reason);
  }
  std::string text = verb + " of " + group + " accepted: " + d.reason;
  if (c == core::Command::failover || c == core::Command::failback)
    text = verb + " of " + group + " started (plan " + std::to_string(d.next.plan_id) +
           "): " + d.reason;
  record(text);
  apply(g, d, r.peer.uid);
  update_status();
  return control::reply(control::kResultSuccess, text,
                        {{"group", group},
                         {"state", std::string(core::to_string(g.state.state))},
                         {"plan_id", g.state.plan_phase ? json(g.state.plan_id) : json(nullptr)}});
}

}  // namespace fo
