// Daemon lifecycle: signals, readiness and status for systemd, watchdog, config reload.
#include <spdlog/spdlog.h>
#include <syslog.h>

#include "daemon/daemon.hpp"
#include "daemon/daemon_group.hpp"
#include "daemon/events.hpp"
#include "daemon/platform/journal.hpp"
#include "daemon/platform/notify.hpp"

namespace fo {

namespace {

platform::SourcePtr add_signal(sd_event* e, int sig, sd_event_signal_handler_t fn, void* self) {
  sd_event_source* s = nullptr;
  int r = sd_event_add_signal(e, &s, sig, fn, self);
  if (r < 0)
    throw std::runtime_error("cannot watch signal " + std::to_string(sig) + ": " +
                             std::string(strerror(-r)));
  return platform::SourcePtr(s);
}

bool same_probes(const config::Group& a, const config::Group& b) {
  auto names = [](const config::Site& s) {
    std::vector<std::string> v;
    for (const auto& p : s.probes) v.push_back(p.name);
    return v;
  };
  return a.locations == b.locations && names(a.primary) == names(b.primary) &&
         names(a.secondary) == names(b.secondary);
}

}  // namespace

int Daemon::run() {
  auto on_stop = [](sd_event_source*, const signalfd_siginfo* si, void* self) -> int {
    spdlog::info("received signal {}, stopping", si->ssi_signo);
    static_cast<Daemon*>(self)->shutdown();
    return 0;
  };
  auto on_hup = [](sd_event_source*, const signalfd_siginfo*, void* self) -> int {
    static_cast<Daemon*>(self)->reload();
    return 0;
  };
  sigterm_ = add_signal(event_.get(), SIGTERM, on_stop, this);
  sigint_ = add_signal(event_.get(), SIGINT, on_stop, this);
  sighup_ = add_signal(event_.get(), SIGHUP, on_hup, this);
  if (platform::enable_watchdog(event_.get())) spdlog::info("systemd watchdog enabled");
  spdlog::info("failoverd {} running: {} group(s), {} location(s), control socket {}",
               FAILOVERD_VERSION, config_.groups.size(), config_.locations.size(),
               config_.daemon.control_socket);
  int r = sd_event_loop(event_.get());
  if (r < 0) {
    spdlog::critical("event loop failed: {}", strerror(-r));
    return 1;
  }
  return 0;
}

void Daemon::shutdown() {
  if (stopping_) return;
  stopping_ = true;
  platform::notify_stopping();
  for (auto& [name, g] : groups_) {
    g->round_timer->disarm();
    if (g->running)
      spdlog::warn("group {}: stopping during {} plan {}; it resumes at the next start", name,
                   core::to_string(g->running->request.phase), g->running->request.plan_id);
  }
  sd_event_exit(event_.get(), 0);
}

void Daemon::update_status() {
  std::string line;
  bool all_ran = true;
  for (const auto& [name, g] : groups_) {
    if (!line.empty()) line += "; ";
    line += name + ": " + std::string(core::to_string(g->state.state)) + " (primary " +
            (g->have_round ? g->primary.fraction() : "?") + ", secondary " +
            (g->have_round ? g->secondary.fraction() : "?") + ")";
    all_ran = all_ran && g->rounds > 0;
  }
  line = platform::one_line(line);
  if (!ready_sent_ && all_ran) {
    ready_sent_ = true;
    platform::notify_ready(line);
    spdlog::info("ready: {}", line);
  } else {
    platform::notify_status(line);
  }
}

void Daemon::reload() {
  spdlog::info("SIGHUP: reloading {}", options_.config_path);
  config::Config next;
  try {
    next = config::load_config_file(options_.config_path);
  } catch (const config::ConfigException& e) {
    for (const auto& err : e.errors()) spdlog::error("config rejected: {}", err.to_string());
    platform::journal_event(
        events::kConfigRejected, LOG_ERR,
        "configuration rejected, keeping the running one: " + e.errors().front().to_string(),
        {{"CONFIG", options_.config_path}, {"ERRORS", std::to_string(e.errors().size())}});
    return;
  }
  for (const auto& [name, g] : groups_) {
    if (!next.find_group(name) && (g->running || !g->plans.empty())) {
      spdlog::error("config rejected: group {} would be removed while its plan is running", name);
      platform::journal_event(
          events::kConfigRejected, LOG_ERR,
          "configuration rejected: group " + name + " would be removed while a plan runs",
          {{"CONFIG", options_.config_path}, {"GROUP", name}});
      return;
    }
  }
  if (next.daemon.state_db != config_.daemon.state_db ||
      next.daemon.control_socket != config_.daemon.control_socket ||
      next.daemon.metrics_listen != config_.daemon.metrics_listen)
    spdlog::warn("daemon.state_db, control_socket and metrics_listen change only at restart");
  next.daemon.state_db = config_.daemon.state_db;
  next.daemon.control_socket = config_.daemon.control_socket;
  next.daemon.metrics_listen = config_.daemon.metrics_listen;
  platform::setup_logging(next.daemon.log_level);

  for (auto it = groups_.begin(); it != groups_.end();) {
    if (!next.find_group(it->first)) {
      spdlog::info("group {} removed by reload", it->first);
      metrics_->forget_group(it->first);
      it = groups_.erase(it);
    } else {
      ++it;
    }
  }
  config_ = std::move(next);
  std::map<std::string, std::string> saved;
  for (const auto& cfg : config_.groups) {
    auto it = groups_.find(cfg.name);
    if (it == groups_.end()) {
      if (saved.empty()) saved = store_->load_group_states();
      add_group(cfg, saved);
      spdlog::info("group {} added by reload", cfg.name);
      continue;
    }
    Group& g = *it->second;
    if (!same_probes(g.cfg, cfg)) {
      metrics_->forget_group(cfg.name);
      g.board = core::HealthBoard(cfg.locations, Group::probe_names(cfg.primary),
                                  Group::probe_names(cfg.secondary));
    }
    g.cfg = cfg;
  }
  spdlog::info("configuration reloaded: {} group(s)", config_.groups.size());
  platform::journal_event(
      events::kConfigReloaded, LOG_NOTICE, "configuration reloaded",
      {{"CONFIG", options_.config_path}, {"GROUPS", std::to_string(config_.groups.size())}});
  update_status();
}

}  // namespace fo
