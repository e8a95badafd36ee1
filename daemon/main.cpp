// failoverd entry point: arguments, config, then hand over to the Daemon. Wiring only.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "daemon/agent/agent_main.hpp"
#include "daemon/config/config.hpp"
#include "daemon/daemon.hpp"
#include "daemon/platform/journal.hpp"
#include "daemon/platform/signals.hpp"

namespace {

constexpr const char* kDefaultConfig = "/etc/failoverd/failoverd.toml";

int check_config(const std::string& path) {
  try {
    auto cfg = fo::config::load_config_file(path);
    size_t steps = 0;
    for (const auto& g : cfg.groups)
      for (const auto& phase : g.steps) steps += phase.size();
    std::printf("%s: OK (%zu group(s), %zu location(s), %zu step(s))\n", path.c_str(),
                cfg.groups.size(), cfg.locations.size(), steps);
    return 0;
  } catch (const fo::config::ConfigException& e) {
    for (const auto& err : e.errors()) std::fprintf(stderr, "%s\n", err.to_string().c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"failoverd: active/passive failover orchestrator"};
  std::string config_path = kDefaultConfig;
  std::string log_level;
  bool check = false, version = false, debug_commands = false, agent = false;
  app.add_option("-c,--config", config_path, "configuration file")->capture_default_str();
  app.add_flag("--check-config", check, "validate the configuration and exit 0 (valid) or 1");
  app.add_flag("--version", version, "print the version and exit");
  app.add_flag("--agent", agent,
               "run as a remote probe agent; --config names the agent config "
               "(see docs/agent-protocol.md)");
  app.add_option("--log-level", log_level, "debug, info, warn or error (overrides the config)")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  app.add_flag("--debug-commands", debug_commands, "enable debug control commands (tests only)")
      ->group("");  // hidden
  CLI11_PARSE(app, argc, argv);

  if (version) {
    std::printf("failoverd %s\n", FAILOVERD_VERSION);
    return 0;
  }
  if (agent && app.count("--config") == 0) {
    std::fprintf(stderr, "failoverd: --agent needs --config AGENT.toml\n");
    return 2;
  }
  if (agent)
    return check ? fo::agent::check_agent_config(config_path)
                 : fo::agent::run_agent(config_path, log_level);
  if (check) return check_config(config_path);

  // Before any thread exists: sd-event's signal and child sources need these blocked.
  fo::platform::block_signals_for_loop();
  std::signal(SIGPIPE, SIG_IGN);  // a peer closing early is an error return, not a death
  fo::platform::setup_logging(log_level.empty() ? "info" : log_level);
  fo::config::Config cfg;
  try {
    cfg = fo::config::load_config_file(config_path);
  } catch (const fo::config::ConfigException& e) {
    for (const auto& err : e.errors()) spdlog::critical("{}", err.to_string());
    return 1;
  }
  if (log_level.empty()) fo::platform::setup_logging(cfg.daemon.log_level);
  try {
    fo::DaemonOptions options;
    options.config_path = config_path;
    options.debug_commands = debug_commands;
    fo::Daemon daemon(options, std::move(cfg));
    return daemon.run();
  } catch (const std::exception& e) {
    spdlog::critical("cannot start: {}", e.what());
    return 1;
  }
}
