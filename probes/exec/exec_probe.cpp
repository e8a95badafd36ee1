// Exec probe through the ExecRunner (see exec_probe.hpp).
#include "probes/exec/exec_probe.hpp"

#include <chrono>

#include "probes/net.hpp"

namespace fo::probes {
namespace {

constexpr std::size_t kMaxOutputShown = 120;
// A check program gets little grace after its timeout: the round is waiting for it.
constexpr core::Millis kKillGrace{200};

}  // namespace

std::string describe_exec_failure(const actions::ExecResult& r) {
  std::string text = r.summary();
  if (r.outcome == actions::ExecResult::Outcome::exited ||
      r.outcome == actions::ExecResult::Outcome::signaled) {
    std::string_view out = r.output;
    while (!out.empty() && (out.front() == '\n' || out.front() == ' ')) out.remove_prefix(1);
    out = out.substr(0, out.find('\n'));
    if (!out.empty()) text += ": " + shorten(out, kMaxOutputShown);
  }
  return text;
}

ExecPlugin::~ExecPlugin() {
  for (uint64_t id : running_) runner_.cancel(id);
}

void ExecPlugin::start(const config::Probe& probe, const config::Location& from,
                       std::function<void(ProbeResult)> done) {
  actions::ExecRequest req;
  req.argv = probe.exec.argv;
  req.timeout = probe.exec.timeout;
  req.output_cap = probe.exec.max_output;
  req.kill_grace = kKillGrace;
  req.env["FAILOVER_PROBE"] = probe.name;
  req.env["FAILOVER_LOCATION"] = from.name;
  if (!from.source_address.empty()) req.env["FAILOVER_SOURCE_ADDRESS"] = from.source_address;
  if (!from.interface.empty()) req.env["FAILOVER_INTERFACE"] = from.interface;
  // The id is known only after start() returns, and the runner never calls back before that.
  auto id_holder = std::make_shared<uint64_t>(0);
  const uint64_t id = runner_.start(
      std::move(req), [this, id_holder, done = std::move(done)](actions::ExecResult r) {
        running_.erase(*id_holder);
        ProbeResult result =
            r.ok() ? ProbeResult::success() : ProbeResult::failure(describe_exec_failure(r));
        result.latency_ms = std::chrono::duration<double, std::milli>(r.duration).count();
        done(std::move(result));
      });
  *id_holder = id;
  running_.insert(id);
}

}  // namespace fo::probes
