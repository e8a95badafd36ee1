// Probe kind registry and dispatch (see dispatcher.hpp).
#include "probes/dispatcher.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "probes/dns/dns_probe.hpp"
#include "probes/exec/exec_probe.hpp"
#include "probes/http/http_probe.hpp"
#include "probes/net.hpp"
#include "probes/postgres/postgres_probe.hpp"
#include "probes/tcp/tcp_probe.hpp"

namespace fo::probes {

ProbeDispatcher::ProbeDispatcher(sd_event* event, platform::CurlMulti& curl,
                                 actions::ExecRunner& exec)
    : event_(event) {
  plugins_["http"] = std::make_unique<HttpPlugin>(curl);
  plugins_["tcp"] = std::make_unique<TcpPlugin>(event);
  plugins_["dns"] = std::make_unique<DnsPlugin>(event);
  plugins_["postgres"] = std::make_unique<PostgresPlugin>(event);
  plugins_["exec"] = std::make_unique<ExecPlugin>(exec);
  kick_ = std::make_unique<platform::Defer>(event_, [this] {
    auto batch = std::move(posted_);
    posted_.clear();
    for (auto& fn : batch) fn();
    pump();
  });
}

void ProbeDispatcher::set_max_concurrent(std::size_t n) {
  max_concurrent_ = std::max<std::size_t>(n, 1);
  if (!queue_.empty()) kick_->schedule();
}

void ProbeDispatcher::pump() {
  while (state_->running < max_concurrent_ && !queue_.empty()) {
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    launch(q.probe, q.from, std::move(q.done));
  }
}

ProbeDispatcher::~ProbeDispatcher() {
  queue_.clear();
  kick_.reset();
  plugins_.clear();
}

void ProbeDispatcher::register_plugin(const std::string& kind,
                                      std::unique_ptr<ProbePlugin> plugin) {
  plugins_[kind] = std::move(plugin);
}

std::vector<std::string> ProbeDispatcher::kinds() const {
  std::vector<std::string> out;
  for (const auto& [kind, plugin] : plugins_) out.push_back(kind);
  return out;
}

void ProbeDispatcher::post(std::function<void()> fn) {
  posted_.push_back(std::move(fn));
  kick_->schedule();
}

void ProbeDispatcher::start(const config::Probe& probe, const config::Location& from,
                            std::function<void(ProbeResult)> done) {
  ++state_->in_flight;
  if (state_->running < max_concurrent_ && queue_.empty())
    return launch(probe, from, std::move(done));
  if (queue_.size() < kMaxQueued) {
    queue_.push_back({probe, from, std::move(done)});
    return;
  }
  // Never dropped silently: the caller hears that the check did not run.
  ProbeResult r;
  r.missing = true;
  r.error = (probe.kind.empty() ? std::string("probe") : probe.kind) +
            ": not run: probe queue full (" + std::to_string(kMaxQueued) + " waiting)";
  std::weak_ptr<State> weak = state_;
  post([weak, r, done = std::move(done)] {
    auto state = weak.lock();
    if (!state) return;
    --state->in_flight;
    done(r);
  });
}

void ProbeDispatcher::launch(const config::Probe& probe, const config::Location& from,
                             std::function<void(ProbeResult)> done) {
  ++state_->running;
  const auto t0 = std::chrono::steady_clock::now();
  // Shared by the plugin's callback and a failure posted here: whichever comes first wins,
  // so `done` runs once even if a plugin throws after taking the callback.
  auto once = std::make_shared<std::function<void(ProbeResult)>>(std::move(done));
  std::weak_ptr<State> weak = state_;
  auto finish = [this, weak, once, t0, kind = probe.kind](ProbeResult r) {
    auto state = weak.lock();
    if (!state || !*once) return;
    --state->in_flight;
    --state->running;
    if (!queue_.empty() && kick_) kick_->schedule();
    auto done = std::move(*once);
    *once = nullptr;
    if (!r.ok && !r.error.empty()) r.error = kind + ": " + r.error;
    if (!r.ok && r.error.empty()) r.error = kind + ": failed";
    if (r.latency_ms <= 0)
      r.latency_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    done(std::move(r));
  };
  auto it = plugins_.find(probe.kind);
  if (it == plugins_.end()) {
    const std::string kind = probe.kind.empty() ? "(none)" : probe.kind;
    ProbeResult r;
    r.error = "unknown probe kind " + shorten(kind, 40);
    return post([finish, r] { finish(r); });
  }
  // A plugin that calls back inside start() (against the contract) is deferred to the loop.
  auto in_start = std::make_shared<bool>(true);
  auto callback = [this, in_start, finish](ProbeResult r) {
    if (*in_start) return post([finish, r = std::move(r)] { finish(r); });
    finish(std::move(r));
  };
  try {
    it->second->start(probe, from, callback);
    *in_start = false;
  } catch (const std::exception& e) {
    *in_start = false;
    post([finish, why = std::string(e.what())] {
      ProbeResult r;
      r.error = "internal error: " + shorten(why, 120);
      finish(r);
    });
  }
}

}  // namespace fo::probes
