// `failoverctl failover G --dry-run` and `failoverctl reconcile G --dry-run` (see plan.hpp).
#include "ctl/plan.hpp"

#include <nlohmann/json.hpp>
#include <ostream>

#include "actions/all_steps.hpp"
#include "actions/executor.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "daemon/platform/event.hpp"
#include "probes/dispatcher.hpp"

namespace fo::ctl {
namespace {

using nlohmann::json;

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string pg_target(const config::PostgresTarget& t) {
  if (!t.conninfo.empty()) return "conninfo";
  return t.host + ":" + std::to_string(t.port) + "/" + t.dbname;
}

}  // namespace

std::string describe_step(const config::Step& s, core::Site target) {
  const bool to_secondary = target == core::Site::secondary;
  if (s.kind == "exec") return "exec " + join(s.argv, " ");
  if (s.kind == "check") {
    const auto& p = s.check;
    std::string what = p.kind;
    if (p.kind == "http") what += " " + p.http.url;
    if (p.kind == "tcp") what += " " + p.tcp.address;
    if (p.kind == "dns") what += " " + p.dns.name + " " + p.dns.type + " @" + p.dns.server;
    if (p.kind == "postgres") what += p.postgres.role.empty() ? "" : " role " + p.postgres.role;
    if (p.kind == "exec") what += " " + join(p.exec.argv, " ");
    return "check: " + what + " must pass";
  }
  if (s.kind == "dns") {
    const auto& d = s.dns;
    return "dns " + d.provider + " " + d.record + " " + d.type + " -> " +
           join(to_secondary ? d.secondary : d.primary, ",") + " (ttl " + std::to_string(d.ttl) +
           "s, verify on " + std::to_string(d.verify.size()) +
           (d.verify.size() == 1 ? " server)" : " servers)");
  }
  if (s.kind == "postgres") {
    const auto& p = s.postgres;
    const auto& to = to_secondary ? p.secondary : p.primary;
    const auto& from = to_secondary ? p.primary : p.secondary;
    return "postgres " + p.action + " " + pg_target(to) + " (fence " + pg_target(from) + ": " +
           p.fence + ", max_lag " + p.max_lag + ")";
  }
  if (s.kind == "systemd") {
    return "systemd " + s.systemd.action + " " + s.systemd.unit +
           (s.systemd.bus_address.empty() ? "" : " on " + s.systemd.bus_address);
  }
  if (s.kind == "webhook") return "webhook POST " + s.webhook.url;
  return s.kind;
}

int run_plan_locally(const config::Config& cfg, const PlanCommand& cmd, std::ostream& out,
                     std::ostream& err) {
  const config::Group* group = cfg.find_group(cmd.group);
  if (!group) {
    err << "failoverctl: no group '" << cmd.group << "' in " << cfg.source << "\n";
    return 2;
  }
  const std::vector<config::Step>& steps = group->steps_for(cmd.phase);
  const std::string phase(core::to_string(cmd.phase));
  const std::string target(core::to_string(cmd.target));
  if (!cmd.json) {
    out << (cmd.observe ? "reconcile " : "dry run of the ") << phase << " plan of group "
        << group->name << " (" << target << " serving)";
    out << (steps.empty() ? ": no steps\n" : ":\n");
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const auto& s = steps[i];
      out << "  " << i + 1 << ". " << s.name << ": " << describe_step(s, cmd.target)
          << "  [timeout " << core::format_duration(s.timeout) << ", retries " << s.retries
          << ", on_failure " << (s.abort_on_failure ? "abort" : "continue") << "]\n";
    }
  }

  platform::EventPtr event = platform::make_event();
  platform::CurlMulti curl(event.get());
  actions::ExecRunner exec(event.get());
  probes::ProbeDispatcher probes(event.get(), curl, exec);
  actions::StepDeps deps;
  deps.event = event.get();
  deps.exec = &exec;
  deps.probes = &probes;
  deps.curl = &curl;
  for (const auto& l : cfg.locations)
    if (l.kind == config::LocationKind::local) {
      deps.local = l;
      break;
    }
  if (deps.local.name.empty()) deps.local.name = "local";
  std::unique_ptr<actions::StepRegistry> registry = actions::make_step_registry(deps);

  actions::StepContext ctx;
  ctx.group = group->name;
  ctx.phase = cmd.phase;
  ctx.target = cmd.target;
  ctx.from = cmd.target == core::Site::secondary ? core::Site::primary : core::Site::secondary;
  ctx.forced = cmd.forced;
  ctx.initiator = "operator";
  ctx.reason = cmd.observe ? "reconcile dry run" : "dry run";
  actions::PlanOptions options;
  options.mode = cmd.observe ? actions::PlanMode::observe : actions::PlanMode::dry_run;

  std::optional<actions::PlanOutcome> outcome;
  actions::PlanHooks hooks;
  hooks.on_step = [&](const actions::StepEvent& e) {
    if (!e.finished) return;
    if (cmd.json) {
      json line = {{"group", group->name}, {"phase", phase},
                   {"stage", e.stage},     {"step", e.name},
                   {"kind", e.kind},       {"result", e.result},
                   {"detail", e.detail},   {"duration_ms", e.duration.count()}};
      out << line.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      return;
    }
    const char* verb = e.stage == "observe" ? (e.result == "ok" ? "in place" : "DRIFT")
                                            : (e.result == "ok" ? "pass" : "FAIL");
    out << "  " << (e.stage == "observe" ? "observe " : "pre-check ") << e.name << ": " << verb
        << ": " << e.detail << "\n";
  };
  hooks.on_done = [&](actions::PlanOutcome o) { outcome = std::move(o); };
  actions::PlanRunner runner(event.get(), *registry, steps, ctx, options, std::move(hooks));
  runner.start();
  // Every step bounds itself by its timeout; the plan as a whole by their sum.
  while (!outcome) {
    const int r = sd_event_run(event.get(), UINT64_MAX);
    if (r < 0) {
      err << "failoverctl: event loop failed: " << -r << "\n";
      return 1;
    }
  }
  if (cmd.json) {
    json summary = {{"group", group->name},   {"phase", phase},   {"target", target},
                    {"ok", outcome->ok},      {"changed", false}, {"detail", outcome->detail},
                    {"drift", outcome->drift}};
    out << summary.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    if (!cmd.observe) out << (outcome->ok ? "pre-checks passed: " : "pre-checks FAILED: ");
    out << outcome->detail << "\nnothing was changed\n";
  }
  return outcome->ok ? 0 : 1;
}

}  // namespace fo::ctl
