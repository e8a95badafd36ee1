// One entry point for every probe kind: ProbeDispatcher owns a plugin per kind (http, tcp, dns,
// postgres, exec) and routes each check to the plugin named by the probe's kind.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actions/exec/exec_runner.hpp"
#include "daemon/config/config.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "daemon/platform/event.hpp"
#include "probes/plugin.hpp"
#include "probes/probe.hpp"

namespace fo::probes {

class ProbeDispatcher {
 public:
  // Registers the built-in kinds. `curl` and `exec` must outlive the dispatcher.
  ProbeDispatcher(sd_event* event, platform::CurlMulti& curl, actions::ExecRunner& exec);
  // Drops every pending callback; checks still running are aborted (sockets closed, exec
  // checks killed).
  ~ProbeDispatcher();
  ProbeDispatcher(const ProbeDispatcher&) = delete;
  ProbeDispatcher& operator=(const ProbeDispatcher&) = delete;

  // Starts one check of `probe` from `from`. `done` runs exactly once, from the loop, never
  // inside start(), unless the dispatcher is destroyed first. The error text starts with the
  // kind ("dns: NXDOMAIN", "tcp: connection refused"); latency_ms is always filled in.
  void start(const config::Probe& probe, const config::Location& from,
             std::function<void(ProbeResult)> done);

  // Checks started and not yet called back (running or queued).
  std::size_t in_flight() const { return state_->in_flight; }
  // Checks waiting for a slot under the concurrency limit.
  std::size_t queued() const { return queue_.size(); }

  // At most `n` (>= 1) checks run at once; more wait in a FIFO queue of at most kMaxQueued.
  // Beyond that a check is not run: its result says so and is marked `missing`.
  void set_max_concurrent(std::size_t n);
  std::size_t max_concurrent() const { return max_concurrent_; }
  static constexpr std::size_t kMaxQueued = 65536;
  static constexpr std::size_t kDefaultMaxConcurrent = 256;

  // Adds or replaces the plugin of `kind` (tests use this for stand-ins).
  void register_plugin(const std::string& kind, std::unique_ptr<ProbePlugin> plugin);
  std::vector<std::string> kinds() const;

 private:
  struct State {
    std::size_t in_flight = 0;
    std::size_t running = 0;
  };
  struct Queued {
    config::Probe probe;
    config::Location from;
    std::function<void(ProbeResult)> done;
  };
  void post(std::function<void()> fn);
  void launch(const config::Probe& probe, const config::Location& from,
              std::function<void(ProbeResult)> done);
  void pump();

  sd_event* event_;
  // Plugins are destroyed before the state, and callbacks hold it only weakly: nothing calls
  // back into a destroyed dispatcher.
  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::map<std::string, std::unique_ptr<ProbePlugin>> plugins_;
  std::vector<std::function<void()>> posted_;
  std::deque<Queued> queue_;
  std::size_t max_concurrent_ = kDefaultMaxConcurrent;
  std::unique_ptr<platform::Defer> kick_;
};

}  // namespace fo::probes
