// The JSON of the agent protocol (docs/agent-protocol.md), shared by the daemon's AgentClient,
// `failoverctl probe` and the agent itself: probes are sent with the keys of the TOML probe
// table, results come back as {"site","probe","ok","latency_ms","error"}. The reply parser
// treats its input as hostile: every field is checked, and one bad field rejects the reply.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/config/config.hpp"
#include "daemon/core/types.hpp"
#include "probes/probe.hpp"

namespace fo::probes::agent {

inline constexpr int kProtocolVersion = 1;
inline constexpr std::string_view kProbePath = "/v1/probe";
inline constexpr std::string_view kHealthPath = "/v1/health";
inline constexpr std::size_t kMaxReplyBytes = 1024 * 1024;
inline constexpr std::size_t kMaxErrorText = 512;
inline constexpr double kMaxLatencyMs = 24.0 * 3600 * 1000;

// One probe of a request: which site it checks, and the probe itself.
struct WireProbe {
  core::Site site = core::Site::primary;
  config::Probe probe;
};

// One result of a reply.
struct WireResult {
  core::Site site = core::Site::primary;
  std::string probe;
  ProbeResult result;
};

// The probe as a TOML probe table would spell it (kind, name, timeout and the kind's keys);
// config::detail::parse_probe on the agent turns it back into the same config::Probe.
nlohmann::json probe_to_json(const config::Probe& probe);

nlohmann::json make_request(const std::string& group, uint64_t round, core::Millis deadline,
                            const std::vector<WireProbe>& probes);

nlohmann::json result_to_json(const WireResult& r);

struct ParsedReply {
  bool ok = false;
  std::string error;  // why the reply was rejected, e.g. "reply: results[2].probe: not asked for"
  std::vector<WireResult> results;
};

// Validates an agent's reply to `round` asking for `asked`. Results for probes not asked, or
// given twice, reject the whole reply; probes without a result are simply missing.
ParsedReply parse_reply(std::string_view body, uint64_t round, const std::vector<WireProbe>& asked);

// "primary" / "secondary", or nullopt-like false for anything else.
bool parse_site(const nlohmann::json& j, core::Site& out);

// A bearer token may only hold visible ASCII (RFC 6750 b64token and then some): anything else
// could split the header. "" when fine, otherwise the problem.
std::string token_problem(std::string_view token);

}  // namespace fo::probes::agent
