// failoverctl: command-line client of failoverd's control socket. Parses arguments and
// dispatches to one function per verb; rendering lives in render.cpp, input in input.cpp.
// To add a verb (simulate, replay, probe, ...): write configure_X/run_X and add a row to kVerbs.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <optional>
#include <string>

#include "ctl/input.hpp"
#include "ctl/render.hpp"
#include "ctl/sim/sim.hpp"
#include "daemon/config/config.hpp"
#include "daemon/control/client.hpp"
#include "daemon/control/protocol.hpp"

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
  std::string config;    // simulate, replay
  std::string timeline;  // simulate
  std::string db;        // replay
};

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

int run_status(const Globals& g, const Options&) {
  return show(g, "status", json::object(),
              [](const json& a) { return ctl::render_status(a, now_ms()); });
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

void configure_failover(CLI::App& app, Options& o) {
  configure_change(app, o);
  app.add_flag("--force", o.force, "Fail over even if the secondary is not healthy");
}

void configure_failback(CLI::App& app, Options& o) {
  configure_change(app, o);
  app.add_flag("--force", o.force, "Fail back even if the primary is not healthy");
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
}

int run_simulate(const Globals& g, const Options& o) {
  auto cfg = load_config(o.config);
  if (!cfg) return kExitDaemonError;
  return fo::sim::run_simulate(*cfg, o.timeline, {g.json}, std::cout, std::cerr);
}

void configure_replay(CLI::App& app, Options& o) {
  app.add_option("--db", o.db, "failoverd state database (history)")->required();
  app.add_option("--config", o.config, "configuration whose policy to replay")->required();
  app.add_option("--since", o.since,
                 "From time T: ms since the epoch, 2026-11-30T10:00:00Z, or relative (-2h)");
  app.add_option("--until", o.until, "Up to time T (same forms as --since)");
}

int run_replay(const Globals& g, const Options& o) {
  auto cfg = load_config(o.config);
  if (!cfg) return kExitDaemonError;
  int64_t since = 0, until = fo::sim::kForever;
  const int64_t now = now_ms();
  for (auto [flag, value, out] :
       {std::tuple{"--since", &o.since, &since}, std::tuple{"--until", &o.until, &until}}) {
    if (value->empty()) continue;
    auto ms = ctl::parse_time(*value, now);
    if (!ms) {
      std::cerr << "failoverctl: invalid " << flag << " '" << *value << "'\n";
      return kExitUsage;
    }
    *out = *ms;
  }
  return fo::sim::run_replay(*cfg, o.db, since, until, {g.json}, std::cout, std::cerr);
}

int run_failover(const Globals& g, const Options& o) {
  return run_change(g, o, "failover", true);
}
int run_failback(const Globals& g, const Options& o) {
  return run_change(g, o, "failback", true);
}
int run_hold(const Globals& g, const Options& o) {
  return run_change(g, o, "hold", false);
}
int run_release(const Globals& g, const Options& o) {
  return run_change(g, o, "release", false);
}

const Verb kVerbs[] = {
    {"status", "Show every group's state and site health", configure_nothing, run_status},
    {"history", "List past transitions, actions, rounds or commands", configure_history,
     run_history},
    {"failover", "Fail a group over to its secondary site", configure_failover, run_failover},
    {"failback", "Fail a group back to its primary site", configure_failback, run_failback},
    {"hold", "Stop automatic decisions for a group", configure_change, run_hold},
    {"release", "Resume automatic decisions for a group", configure_change, run_release},
    {"version", "Show the versions of failoverctl and failoverd", configure_nothing, run_version},
    {"simulate", "Run the decision engine over a CSV timeline in simulated time",
     configure_simulate, run_simulate},
    {"replay", "Run a policy over the rounds recorded in a state database", configure_replay,
     run_replay},
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
