// The daemon's side of a remote probe agent (kind = "agent" locations): one HTTP(S) request per
// (group, round) on the shared CurlMulti, carrying all the group's probes of both sites, and the
// reply mapped back to per-probe results. The agent is untrusted: the reply is size-, time- and
// schema-checked, and anything wrong makes every result of that location missing (never a
// failure). A failing or overloaded agent is backed off exponentially with jitter (honouring
// Retry-After), so the load on it never rises during an outage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "daemon/config/config.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "probes/agent_wire.hpp"

namespace fo::probes {

struct AgentOutcome {
  bool ok = false;    // false: no result from this location this round (all missing)
  std::string error;  // why not, e.g. "agent: backing off (4.1s left) after: connection refused"
  std::vector<agent::WireResult> results;  // ok: the probes the agent finished in time
};

struct AgentClientOptions {
  std::size_t max_reply_bytes = agent::kMaxReplyBytes;
  core::Millis backoff_initial{1000};
  core::Millis backoff_max{300000};
  uint64_t seed = 0;  // jitter seed; 0: random
};

class AgentClient {
 public:
  // `location` must be of kind agent. `curl` must outlive the client.
  AgentClient(platform::CurlMulti& curl, config::Location location,
              AgentClientOptions options = AgentClientOptions());
  // In-flight requests are abandoned; their callbacks are never called.
  ~AgentClient();
  AgentClient(const AgentClient&) = delete;
  AgentClient& operator=(const AgentClient&) = delete;

  // Asks the agent to run `probes` of `group` for `round`; the whole exchange ends within
  // `deadline` (capped further by the location's timeout). `done` runs exactly once, from the
  // loop, never inside query(). During a backoff nothing is sent.
  void query(const std::string& group, uint64_t round, core::Millis deadline,
             const std::vector<agent::WireProbe>& probes, std::function<void(AgentOutcome)> done);

  const config::Location& location() const { return location_; }
  // "" while the agent answers well; otherwise what went wrong last and the backoff state.
  std::string status() const;
  bool backing_off() const;
  core::Millis backoff_left() const;
  std::size_t requests_sent() const { return sent_; }
  int consecutive_failures() const { return failures_; }

 private:
  struct Exchange;
  void finish(Exchange& x, AgentOutcome outcome, core::Millis retry_after);
  void note_failure(const std::string& why, core::Millis retry_after);
  core::Millis now() const;

  platform::CurlMulti& curl_;
  config::Location location_;
  AgentClientOptions options_;
  std::mt19937_64 rng_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  int failures_ = 0;
  core::Millis backoff_until_{0};  // monotonic
  std::string last_error_;
  std::size_t sent_ = 0;
};

}  // namespace fo::probes
