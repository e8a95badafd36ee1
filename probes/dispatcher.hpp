// One entry point for every probe kind: ProbeDispatcher owns a plugin per kind (http, tcp, dns,
// postgres, exec) and routes each check to the plugin named by the probe's kind.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
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

  // Checks started and not yet called back.
  std::size_t in_flight() const { return state_->in_flight; }

  // Adds or replaces the plugin of `kind` (tests use this for stand-ins).
  void register_plugin(const std::string& kind, std::unique_ptr<ProbePlugin> plugin);
  std::vector<std::string> kinds() const;

 private:
  struct State {
    std::size_t in_flight = 0;
  };
  void post(std::function<void()> fn);

  sd_event* event_;
  // Plugins are destroyed before the state, and callbacks hold it only weakly: nothing calls
  // back into a destroyed dispatcher.
  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::map<std::string, std::unique_ptr<ProbePlugin>> plugins_;
  std::vector<std::function<void()>> posted_;
  std::unique_ptr<platform::Defer> kick_;
};

}  // namespace fo::probes
