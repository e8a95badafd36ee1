// failoverctl: command-line client of failoverd's control socket. Parses arguments and
// dispatches to one function per verb; rendering lives in render.cpp, input in input.cpp.
// To add a verb (simulate, replay, probe, ...): write configure_X/run_X and add a row to kVerbs.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

#include "ctl/input.hpp"
#include "ctl/plan.hpp"
#include "ctl/probe.hpp"
#include "ctl/render.hpp"
#include "ctl/sim/sim.hpp"
#include "ctl/svg.hpp"
#include "ctl/timeline.hpp"
#include "ctl/watch.hpp"
#include "daemon/config/config.hpp"
#include "daemon/control/client.hpp"
#include "daemon/control/protocol.hpp"
#include "daemon/store/reader.hpp"

namespace {

using nlohmann::json;
namespace control = fo::control;
namespace ctl = fo::ctl;

constexpr int kExitOk = 0;
constexpr int kExitDaemonError = 1;  // the daemon answered with a non-zero result
constexpr int kExitUsage = 2;        // bad arguments, or a disruptive verb not confirmed
constexpr int kExitUnreachable = 3;  // no (valid) answer from the daemon

struct Globals {
  std::string socket = control::kDefaultSocketPath;
  bool json = false;
  int timeout_ms = 5000;
};

// Storage for every verb's options; a new verb adds its fields here.
struct Options {
  std::string group;
  int limit = 50;
  std::string kind = "transitions";
  std::string since;
  std::string until;
  bool force = false;
  std::string reason;
  bool yes = false;
  std::string config;                                      // simulate, replay
  std::string timeline;                                    // simulate
  std::string db = fo::config::DaemonSettings{}.state_db;  // replay, timeline
  std::string svg;                                         // simulate, timeline
  bool watch = false;                                      // status
  std::string interval = "2s";                             // status --watch
  bool dry_run = false;                                    // failover, failback, reconcile
  std::string active;                                      // reconcile --dry-run
};

constexpr const char* kDefaultConfig = "/etc/failoverd/failoverd.toml";

struct Verb {
  const char* name;
  const char* description;
  void (*configure)(CLI::App& app, Options& options);
  int (*run)(const Globals& globals, const Options& options);
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string dump(const json& value) {
  return value.dump(2, ' ', false, json::error_handler_t::replace);
}

const json& arguments_of(const json& reply) {
  static const json kEmpty = json::object();
  auto it = reply.find("arguments");
  return it != reply.end() && it->is_object() ? *it : kEmpty;
}

std::string text_of(const json& reply) {
  auto it = reply.find("text");
  return it != reply.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Sends one command. Returns the reply, or nullopt after printing why the daemon is unreachable.
std::optional<json> request(const Globals& g, const std::string& command, json arguments) {
  try {
    return control::call(g.socket, control::make_request(command, std::move(arguments)),
                         std::chrono::milliseconds(g.timeout_ms));
  } catch (const control::ControlError& e) {
    std::cerr << "failoverctl: " << e.what() << "\n";
    return std::nullopt;
  }
}

// Prints a non-zero result's text on stderr. Returns the exit code for the reply.
int check_result(const json& reply) {
  const int result = reply.at("result").get<int>();  // call() guarantees an integer result
  if (result == control::kResultSuccess) return kExitOk;
  std::string text = text_of(reply);
  if (text.empty()) text = control::result_name(result);
  std::cerr << "failoverd: " << text << " (" << control::result_name(result) << ")\n";
  return kExitDaemonError;
}

// Data verbs: --json prints the reply's arguments, otherwise the rendered view.
int show(const Globals& g, const std::string& command, json arguments,
         std::string (*render)(const json&)) {
  auto reply = request(g, command, std::move(arguments));
  if (!reply) return kExitUnreachable;
  if (int code = check_result(*reply); code != kExitOk) return code;
  std::cout << (g.json ? dump(arguments_of(*reply)) + "\n" : render(arguments_of(*reply)));
  return kExitOk;
}

void configure_nothing(CLI::App&, Options&) {}

void configure_status(CLI::App& app, Options& o) {
  app.add_flag("--watch,-w", o.watch, "Refresh until Ctrl-C (in place on a terminal)");
  app.add_option("--interval", o.interval, "Refresh every D with --watch (100ms..1h)")
      ->capture_default_str();
}

ctl::WatchSample watch_sample(const Globals& g) {
  ctl::WatchSample sample;
  try {
    json reply = control::call(g.socket, control::make_request("status", json::object()),
                               std::chrono::milliseconds(g.timeout_ms));
    if (reply.at("result").get<int>() != control::kResultSuccess) {
      sample.error = text_of(reply);
      if (sample.error.empty()) sample.error = control::result_name(reply.at("result").get<int>());
      return sample;
    }
    sample.ok = true;
    sample.arguments = arguments_of(reply);
  } catch (const control::ControlError& e) {
    sample.error = e.what();
  }
  return sample;
}

int run_status(const Globals& g, const Options& o) {
  if (!o.watch)
    return show(g, "status", json::object(),
                [](const json& a) { return ctl::render_status(a, now_ms()); });
  const auto interval = fo::core::parse_duration(o.interval);
  if (!interval || *interval < ctl::kMinWatchInterval || *interval > ctl::kMaxWatchInterval) {
    std::cerr << "failoverctl: invalid --interval '" << o.interval
              << "': expected a duration from 100ms to 1h, like 2s or 500ms\n";
    return kExitUsage;
  }
  ctl::WatchOptions options{*interval, g.json, ::isatty(STDOUT_FILENO) == 1};
  return ctl::run_watch(
      options, [&] { return watch_sample(g); }, std::cout);
}

void configure_history(CLI::App& app, Options& o) {
  app.add_option("group", o.group, "Only this group");
  app.add_option("--limit", o.limit, "At most N entries (1..10000)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--kind", o.kind, "What to list")
      ->check(CLI::IsMember({"transitions", "actions", "rounds", "commands"}))
      ->capture_default_str();
  app.add_option("--since", o.since,
                 "From time T: ms since the epoch, 2026-11-30T10:00:00Z, or relative (-2h)");
  app.add_option("--until", o.until, "Up to time T (same forms as --since)");
}

int run_history(const Globals& g, const Options& o) {
  json arguments{{"kind", o.kind}, {"limit", o.limit}};
  if (!o.group.empty()) arguments["group"] = o.group;
  const int64_t now = now_ms();
  for (auto [flag, value, key] :
       {std::tuple{"--since", &o.since, "since_ms"}, std::tuple{"--until", &o.until, "until_ms"}}) {
    if (value->empty()) continue;
    auto ms = ctl::parse_time(*value, now);
    if (!ms) {
      std::cerr << "failoverctl: invalid " << flag << " '" << *value
                << "': expected ms since the epoch, ISO-8601 UTC like 2026-11-30T10:00:00Z, "
                   "or relative like -2h\n";
      return kExitUsage;
    }
    arguments[key] = *ms;
  }
  return show(g, "history", std::move(arguments),
              [](const json& a) { return ctl::render_history(a, now_ms()); });
}

int run_version(const Globals& g, const Options&) {
  return show(g, "version", json::object(),
              [](const json& a) { return ctl::render_version(a, FO_VERSION); });
}

void configure_change(CLI::App& app, Options& o) {
  app.add_option("group", o.group, "The group")->required();
  app.add_option("--reason", o.reason, "Why (stored in the history)");
  app.add_flag("--yes,-y", o.yes, "Do not ask for confirmation");
}

void configure_dry_run(CLI::App& app, Options& o) {
  app.add_flag("--dry-run", o.dry_run,
               "Print the resolved plan and run its pre-checks here; change nothing");
  app.add_option("--config", o.config, "failoverd configuration for --dry-run")
      ->default_str(kDefaultConfig);
}

void configure_failover(CLI::App& app, Options& o) {
  configure_change(app, o);
  app.add_flag("--force", o.force, "Fail over even if the secondary is not healthy");
  configure_dry_run(app, o);
}

void configure_failback(CLI::App& app, Options& o) {
  configure_change(app, o);
  app.add_flag("--force", o.force, "Fail back even if the primary is not healthy");
  configure_dry_run(app, o);
}

// The disruptive verbs: show what will happen, ask, then send the command.
int run_change(const Globals& g, const Options& o, const std::string& verb, bool has_plan) {
  // With --json, stdout carries only the reply; the explanation goes to stderr.
  std::ostream& out = g.json ? std::cerr : std::cout;
  json plan;
  if (has_plan) {
    auto reply = request(g, "plan", json{{"group", o.group}, {"phase", verb}});
    if (!reply) return kExitUnreachable;
    if (int code = check_result(*reply); code != kExitOk) return code;
    plan = arguments_of(*reply);
  }
  out << ctl::describe_change(verb, o.group, plan, o.force);
  switch (ctl::confirm(std::cin, out, ::isatty(STDIN_FILENO) == 1, o.yes)) {
    case ctl::Confirmation::confirmed:
      break;
    case ctl::Confirmation::no_terminal:
      std::cerr << "failoverctl: refusing to " << verb << " group " << o.group
                << " without confirmation: stdin is not a terminal (pass --yes)\n";
      return kExitUsage;
    case ctl::Confirmation::declined:
      std::cerr << "aborted; nothing was changed\n";
      return kExitUsage;
  }
  json arguments{{"group", o.group}, {"reason", o.reason}};
  if (verb == "failover" || verb == "failback") arguments["force"] = o.force;
  auto reply = request(g, verb, std::move(arguments));
  if (!reply) return kExitUnreachable;
  if (g.json) {
    std::cout << dump(*reply) << "\n";
    return reply->at("result") == control::kResultSuccess ? kExitOk : kExitDaemonError;
  }
  if (int code = check_result(*reply); code != kExitOk) return code;
  std::cout << text_of(*reply) << "\n";
  return kExitOk;
}

// Writes the picture to `path` ("-": stdout). False after printing why it failed.
bool write_svg(const std::string& path, const std::string& document) {
  if (path == "-") {
    std::cout << document << std::flush;
    return static_cast<bool>(std::cout);
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << document;
  file.close();
  if (!file) {
    std::cerr << "failoverctl: cannot write " << path << "\n";
    return false;
  }
  return true;
}

// simulate and replay run the engine locally, in simulated time; they never talk to the daemon.
std::optional<fo::config::Config> load_config(const std::string& path) {
  try {
    return fo::config::load_config_file(path);
  } catch (const fo::config::ConfigException& e) {
    for (const auto& err : e.errors()) std::cerr << err.to_string() << "\n";
    return std::nullopt;
  }
}

void configure_simulate(CLI::App& app, Options& o) {
  app.add_option("--config", o.config, "failoverd configuration (policy, groups, steps)")
      ->required();
  app.add_option("--timeline", o.timeline, "CSV with header t,group,site,location,ok")->required();
  app.add_option("--svg", o.svg, "Also draw the timeline as a picture into FILE");
}

int run_simulate(const Globals& g, const Options& o) {
  auto cfg = load_config(o.config);
  if (!cfg) return kExitDaemonError;
  fo::sim::SimOptions options;
  options.json = g.json;
  std::vector<std::string> names;
  for (const auto& group : cfg->groups) names.push_back(group.name);
  ctl::SimTimeline picture(names);
  if (!o.svg.empty()) options.observer = [&](const fo::core::SimEvent& e) { picture.add(e); };
  const int code = fo::sim::run_simulate(*cfg, o.timeline, options, std::cout, std::cerr);
  if (code != kExitOk || o.svg.empty()) return code;
  const std::string title = "failoverctl simulate: " + o.timeline;
  return write_svg(o.svg, ctl::svg::render_timeline_svg(picture.chart(title))) ? kExitOk
                                                                               : kExitDaemonError;
}

void configure_replay(CLI::App& app, Options& o) {
  app.add_option("--db", o.db, "failoverd state database (history)")->required();
  app.add_option("--config", o.config, "configuration whose policy to replay")->required();
  app.add_option("--since", o.since,
                 "From time T: ms since the epoch, 2026-11-30T10:00:00Z, or relative (-2h)");
  app.add_option("--until", o.until, "Up to time T (same forms as --since)");
}

// Parses --since/--until into [since, until); false after printing the bad one.
bool parse_range(const Options& o, int64_t& since, int64_t& until) {
  const int64_t now = now_ms();
  for (auto [flag, value, out] :
       {std::tuple{"--since", &o.since, &since}, std::tuple{"--until", &o.until, &until}}) {
    if (value->empty()) continue;
    auto ms = ctl::parse_time(*value, now);
    if (!ms) {
      std::cerr << "failoverctl: invalid " << flag << " '" << *value
                << "': expected ms since the epoch, ISO-8601 UTC like 2026-11-30T10:00:00Z, "
                   "or relative like -2h\n";
      return false;
    }
    *out = *ms;
  }
  return true;
}

void configure_timeline(CLI::App& app, Options& o) {
  app.add_option("group", o.group, "The group")->required();
  app.add_option("--since", o.since,
                 "From time T: ms since the epoch, 2026-11-30T10:00:00Z, or relative (-2h)");
  app.add_option("--until", o.until, "Up to time T (same forms as --since)");
  app.add_option("--svg", o.svg, "Write the picture to FILE (- for stdout)")->required();
  app.add_option("--db", o.db, "failoverd state database (read only)")->capture_default_str();
}

// Reads the history directly from the database (read-only), so it also works when the daemon
// is stopped or impaired.
int run_timeline(const Globals&, const Options& o) {
  int64_t since = 0, until = std::numeric_limits<int64_t>::max();
  if (!parse_range(o, since, until)) return kExitUsage;
  if (until <= since) {
    std::cerr << "failoverctl: --until must be after --since\n";
    return kExitUsage;
  }
  fo::ctl::svg::Chart chart;
  try {
    fo::store::Reader reader(o.db);
    chart = ctl::timeline_from_store(reader, o.group, since, until);
  } catch (const std::exception& e) {
    std::cerr << "failoverctl: " << e.what() << "\n";
    return kExitDaemonError;
  }
  return write_svg(o.svg, ctl::svg::render_timeline_svg(chart)) ? kExitOk : kExitDaemonError;
}

int run_replay(const Globals& g, const Options& o) {
  auto cfg = load_config(o.config);
  if (!cfg) return kExitDaemonError;
  int64_t since = 0, until = fo::sim::kForever;
  if (!parse_range(o, since, until)) return kExitUsage;
  fo::sim::SimOptions options;
  options.json = g.json;
  return fo::sim::run_replay(*cfg, o.db, since, until, options, std::cout, std::cerr);
}

void configure_probe(CLI::App& app, Options& o) {
  app.add_option("--config", o.config, "failoverd configuration (locations, groups, probes)")
      ->required();
  app.add_option("--group", o.group, "Only this group");
}

int run_probe(const Globals& g, const Options& o) {
  auto cfg = load_config(o.config);
  if (!cfg) return kExitUsage;
  return ctl::run_probe_round(*cfg, {o.group, g.json}, std::cout, std::cerr);
}

// Dry runs and reconcile --dry-run read the config and run the steps' checks or observations
// here, with the daemon's plugins; they work without a daemon and change nothing.
int run_plan_here(const Globals& g, const Options& o, fo::core::Phase phase, fo::core::Site target,
                  bool observe) {
  auto cfg = load_config(o.config.empty() ? kDefaultConfig : o.config);
  if (!cfg) return kExitUsage;
  ctl::PlanCommand cmd;
  cmd.group = o.group;
  cmd.phase = phase;
  cmd.target = target;
  cmd.observe = observe;
  cmd.forced = o.force;
  cmd.json = g.json;
  return ctl::run_plan_locally(*cfg, cmd, std::cout, std::cerr);
}

int run_failover(const Globals& g, const Options& o) {
  if (o.dry_run)
    return run_plan_here(g, o, fo::core::Phase::failover, fo::core::Site::secondary, false);
  return run_change(g, o, "failover", true);
}
int run_failback(const Globals& g, const Options& o) {
  if (o.dry_run)
    return run_plan_here(g, o, fo::core::Phase::failback, fo::core::Site::primary, false);
  return run_change(g, o, "failback", true);
}

void configure_reconcile(CLI::App& app, Options& o) {
  app.add_option("group", o.group, "The group")->required();
  app.add_flag("--dry-run", o.dry_run, "Observe every step's effect here and print the drift")
      ->required();
  app.add_option("--config", o.config, "failoverd configuration")->default_str(kDefaultConfig);
  app.add_option("--active", o.active, "The site that should be serving (default: ask the daemon)")
      ->check(CLI::IsMember({"primary", "secondary"}));
}

int run_reconcile(const Globals& g, const Options& o) {
  std::string active = o.active;
  if (active.empty()) {
    auto reply = request(g, "status", json::object());
    if (!reply) {
      std::cerr << "failoverctl: pass --active primary|secondary when the daemon is not "
                   "reachable\n";
      return kExitUnreachable;
    }
    for (const auto& grp : arguments_of(*reply).value("groups", json::array()))
      if (grp.value("name", "") == o.group) active = grp.value("active", "");
    if (active != "primary" && active != "secondary") {
      std::cerr << "failoverctl: the daemon does not report group " << o.group
                << "; pass --active primary|secondary\n";
      return kExitUsage;
    }
  }
  const bool secondary = active == "secondary";
  return run_plan_here(g, o, secondary ? fo::core::Phase::failover : fo::core::Phase::failback,
                       secondary ? fo::core::Site::secondary : fo::core::Site::primary, true);
}
int run_hold(const Globals& g, const Options& o) {
  return run_change(g, o, "hold", false);
}
int run_release(const Globals& g, const Options& o) {
  return run_change(g, o, "release", false);
}

const Verb kVerbs[] = {
    {"status", "Show every group's state and site health", configure_status, run_status},
    {"history", "List past transitions, actions, rounds or commands", configure_history,
     run_history},
    {"failover", "Fail a group over to its secondary site", configure_failover, run_failover},
    {"failback", "Fail a group back to its primary site", configure_failback, run_failback},
    {"reconcile", "Show how the world differs from the intended state (--dry-run)",
     configure_reconcile, run_reconcile},
    {"hold", "Stop automatic decisions for a group", configure_change, run_hold},
    {"release", "Resume automatic decisions for a group", configure_change, run_release},
    {"version", "Show the versions of failoverctl and failoverd", configure_nothing, run_version},
    {"simulate", "Run the decision engine over a CSV timeline in simulated time",
     configure_simulate, run_simulate},
    {"replay", "Run a policy over the rounds recorded in a state database", configure_replay,
     run_replay},
    {"probe", "Run one round of probes from every location now, without the daemon",
     configure_probe, run_probe},
    {"timeline", "Draw a group's health, serving site and transitions from the history as SVG",
     configure_timeline, run_timeline},
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"failoverctl: query and steer failoverd"};
  app.fallthrough();  // global options may also follow the verb
  app.require_subcommand(1);
  Globals globals;
  Options options;
  app.add_option("--socket", globals.socket, "Control socket of failoverd")
      ->envname("FAILOVERCTL_SOCKET")
      ->capture_default_str();
  app.add_flag("--json", globals.json, "Print JSON instead of tables");
  app.add_option("--timeout", globals.timeout_ms, "Give up after MS milliseconds")
      ->check(CLI::Range(1, 3600000))
      ->capture_default_str();
  for (const Verb& verb : kVerbs) {
    verb.configure(*app.add_subcommand(verb.name, verb.description), options);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  for (const Verb& verb : kVerbs) {
    if (app.got_subcommand(verb.name)) return verb.run(globals, options);
  }
  return kExitUsage;
}
