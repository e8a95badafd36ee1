// The running daemon: wires the event loop, probes, decision engine, plan executor, store and
// control socket together. All of it runs on one sd-event loop thread; only the store writes on
// its own thread. The engine is called with snapshots and returns decisions; this class carries
// them out (records, logs, runs plans) and never decides anything itself.
#pragma once

#include <systemd/sd-event.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "actions/exec/exec_runner.hpp"
#include "actions/executor.hpp"
#include "daemon/config/config.hpp"
#include "daemon/control/server.hpp"
#include "daemon/core/engine.hpp"
#include "daemon/metrics/daemon_metrics.hpp"
#include "daemon/metrics/server.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "daemon/platform/event.hpp"
#include "daemon/store/intents.hpp"
#include "daemon/store/store.hpp"
#include "probes/agent_client.hpp"
#include "probes/dispatcher.hpp"

namespace fo {

struct DaemonOptions {
  std::string config_path;
  // Retry policy of plan steps; tests shorten it.
  actions::RetryPolicy retry;
  // Enables the debug_stall control command (blocks the loop; for watchdog tests only).
  bool debug_commands = false;
  // Seed of the round timers' jitter (tests pin it); 0: random.
  uint64_t round_seed = 0;
};

class Daemon {
 public:
  // Loads nothing itself: the caller passes a validated config. Opens the store and the
  // control socket; throws std::runtime_error with a clear message when that fails.
  Daemon(DaemonOptions options, config::Config config);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Runs the loop until SIGTERM/SIGINT. Returns the process exit code.
  int run();

 private:
  struct Group;
  struct PlanRun;

  void add_group(const config::Group& cfg, const std::map<std::string, std::string>& saved);
  void schedule_round(Group& g, core::Millis delay);
  void start_round(Group& g);
  void finish_round(Group& g);
  void end_check(Group& g, uint64_t gen);
  void record_result(Group& g, uint64_t gen, core::Site site, const std::string& location,
                     const std::string& probe, probes::ProbeResult r);
  probes::AgentClient& agent_for(const config::Location& loc);
  void apply(Group& g, const core::Decision& d, std::optional<uint32_t> uid);
  void enqueue(Group& g, const core::ActionRequest& a);
  void build_step_registry();
  void schedule_reconcile(Group& g);
  void start_reconcile(Group& g);
  void reconcile_done(Group& g, const actions::PlanOutcome& outcome);
  void record_step(const std::string& group, const core::ActionRequest& a,
                   const actions::StepEvent& e);
  void run_next_plan(Group& g);
  void plan_done(Group& g, const actions::PlanOutcome& outcome);
  void save_state(Group& g);
  void update_status();
  void reload();
  void shutdown();

  nlohmann::json handle(const control::Request& r);
  nlohmann::json dispatch(const control::Request& r);
  nlohmann::json handle_status();
  nlohmann::json locations_json(const Group& g) const;
  nlohmann::json handle_history(const nlohmann::json& args);
  nlohmann::json handle_plan(const nlohmann::json& args);
  nlohmann::json handle_command(const control::Request& r, core::Command c);
  bool may_change(const control::Peer& peer) const;

  core::Instant now() const;

  DaemonOptions options_;
  config::Config config_;
  platform::EventPtr event_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<platform::CurlMulti> curl_;
  std::unique_ptr<actions::ExecRunner> exec_;
  std::unique_ptr<store::IntentLog> intents_;
  std::unique_ptr<actions::StepRegistry> step_registry_;
  std::unique_ptr<probes::ProbeDispatcher> probes_;
  std::map<std::string, std::unique_ptr<Group>> groups_;
  std::unique_ptr<control::ControlServer> control_;
  std::unique_ptr<metrics::DaemonMetrics> metrics_;
  std::unique_ptr<metrics::MetricsServer> metrics_server_;
  platform::SourcePtr sigterm_, sigint_, sighup_;
  bool ready_sent_ = false;
  bool stopping_ = false;
  core::Instant started_{};
  uint64_t generation_ = 0;  // round counter; results of an abandoned round are dropped
  std::map<std::string, std::unique_ptr<probes::AgentClient>> agents_;  // by location name
  std::mt19937_64 round_rng_{options_.round_seed ? options_.round_seed : std::random_device{}()};
};

}  // namespace fo
