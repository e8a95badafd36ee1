// Agent protocol JSON (see agent_wire.hpp and docs/agent-protocol.md).
#include "probes/agent_wire.hpp"

#include <cmath>
#include <set>
#include <utility>

namespace fo::probes::agent {
namespace {

using nlohmann::json;

std::string ms_text(core::Millis d) {
  return std::to_string(d.count()) + "ms";
}

std::string status_list(const std::vector<config::StatusRange>& ranges) {
  std::string out;
  for (const auto& r : ranges) {
    if (!out.empty()) out += ",";
    out += std::to_string(r.lo);
    if (r.hi != r.lo) out += "-" + std::to_string(r.hi);
  }
  return out;
}

// Error texts from a hostile peer end up in logs and status: one line, bounded, printable.
std::string clean_text(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, kMaxErrorText)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? ' ' : c;
  }
  if (s.size() > kMaxErrorText) out += "...";
  return out;
}

}  // namespace

json probe_to_json(const config::Probe& p) {
  json j = {{"kind", p.kind}, {"name", p.name}};
  if (p.kind == "http") {
    const auto& h = p.http;
    j["url"] = h.url;
    j["method"] = h.method;
    j["expect_status"] = status_list(h.expect_status);
    if (!h.body_contains.empty()) j["body_contains"] = h.body_contains;
    if (!h.body_regex.empty()) j["body_regex"] = h.body_regex;
    if (!h.headers.empty()) j["headers"] = h.headers;
    j["tls_verify"] = h.tls_verify;
    if (!h.ca_file.empty()) j["ca_file"] = h.ca_file;
    if (!h.client_cert.empty()) j["client_cert"] = h.client_cert;
    if (!h.client_key.empty()) j["client_key"] = h.client_key;
    if (!h.resolve.empty()) j["resolve"] = h.resolve;
    j["max_body"] = h.max_body;
    if (h.abortive_close) j["abortive_close"] = true;
    j["timeout"] = ms_text(h.timeout);
  } else if (p.kind == "tcp") {
    const auto& t = p.tcp;
    j["address"] = t.address;
    if (!t.send.empty()) j["send"] = t.send;
    if (!t.expect.empty()) j["expect"] = t.expect;
    j["max_read"] = t.max_read;
    j["timeout"] = ms_text(t.timeout);
  } else if (p.kind == "dns") {
    const auto& d = p.dns;
    j["server"] = d.server;
    j["qname"] = d.name;
    j["type"] = d.type;
    j["rcode"] = d.rcode;
    if (!d.expect.empty()) j["expect"] = d.expect;
    j["timeout"] = ms_text(d.timeout);
  } else if (p.kind == "postgres") {
    const auto& g = p.postgres;
    if (!g.conninfo.empty()) {
      j["conninfo"] = g.conninfo;
    } else {
      j["host"] = g.host;
      j["port"] = g.port;
      j["dbname"] = g.dbname;
      j["user"] = g.user;
    }
    if (!g.password_file.empty()) j["password_file"] = g.password_file;
    if (!g.role.empty()) j["role"] = g.role;
    if (!g.max_lag.empty()) j["max_lag"] = g.max_lag;
    j["timeout"] = ms_text(g.timeout);
  } else if (p.kind == "exec") {
    j["argv"] = p.exec.argv;
    j["max_output"] = p.exec.max_output;
    j["timeout"] = ms_text(p.exec.timeout);
  }
  return j;
}

json make_request(const std::string& group, uint64_t round, core::Millis deadline,
                  const std::vector<WireProbe>& probes) {
  json list = json::array();
  for (const auto& p : probes)
    list.push_back(
        {{"site", std::string(core::to_string(p.site))}, {"probe", probe_to_json(p.probe)}});
  return {{"version", kProtocolVersion},
          {"group", group},
          {"round", round},
          {"deadline_ms", deadline.count()},
          {"probes", std::move(list)}};
}

json result_to_json(const WireResult& r) {
  return {{"site", std::string(core::to_string(r.site))},
          {"probe", r.probe},
          {"ok", r.result.ok},
          {"latency_ms", std::round(r.result.latency_ms * 1000) / 1000},
          {"error", r.result.error}};
}

bool parse_site(const json& j, core::Site& out) {
  if (!j.is_string()) return false;
  const auto& s = j.get_ref<const std::string&>();
  if (s == "primary")
    out = core::Site::primary;
  else if (s == "secondary")
    out = core::Site::secondary;
  else
    return false;
  return true;
}

std::string token_problem(std::string_view token) {
  if (token.empty()) return "is empty";
  if (token.size() > 4096) return "is longer than 4096 bytes";
  for (char c : token)
    if (c <= 0x20 || c >= 0x7f) return "may only hold visible ASCII characters (no spaces)";
  return "";
}

ParsedReply parse_reply(std::string_view body, uint64_t round,
                        const std::vector<WireProbe>& asked) {
  ParsedReply out;
  auto fail = [&](std::string why) {
    out.ok = false;
    out.error = "reply: " + std::move(why);
    out.results.clear();
    return out;
  };
  if (body.size() > kMaxReplyBytes) return fail("larger than " + std::to_string(kMaxReplyBytes));
  // A valid reply is 4 levels deep; deeper values are dropped while parsing (not kept in memory)
  // and the reply is refused.
  int max_depth = 0;
  const json j = json::parse(
      body,
      [&](int d, json::parse_event_t, json&) {
        max_depth = std::max(max_depth, d);
        return d <= 8;
      },
      false);
  if (j.is_discarded()) return fail("not valid JSON");
  if (max_depth > 8) return fail("nested too deeply");
  if (!j.is_object()) return fail("not a JSON object");
  const auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || *version != kProtocolVersion)
    return fail("version must be " + std::to_string(kProtocolVersion));
  const auto r = j.find("round");
  if (r == j.end() || !r->is_number_unsigned() || r->get<uint64_t>() != round)
    return fail("round does not match the request (" + std::to_string(round) + ")");
  const auto results = j.find("results");
  if (results == j.end() || !results->is_array()) return fail("results must be an array");
  if (results->size() > asked.size())
    return fail("more results (" + std::to_string(results->size()) + ") than probes asked (" +
                std::to_string(asked.size()) + ")");
  std::set<std::pair<int, std::string>> wanted, seen;
  for (const auto& a : asked) wanted.insert({int(a.site), a.probe.name});
  for (std::size_t i = 0; i < results->size(); ++i) {
    const json& e = (*results)[i];
    const std::string at = "results[" + std::to_string(i) + "]";
    if (!e.is_object()) return fail(at + ": not an object");
    WireResult w;
    const auto site = e.find("site");
    if (site == e.end() || !parse_site(*site, w.site))
      return fail(at + ".site: must be \"primary\" or \"secondary\"");
    const auto probe = e.find("probe");
    if (probe == e.end() || !probe->is_string()) return fail(at + ".probe: must be a string");
    w.probe = probe->get<std::string>();
    if (!wanted.count({int(w.site), w.probe}))
      return fail(at + ".probe: " + clean_text(w.probe).substr(0, 64) + " was not asked for");
    if (!seen.insert({int(w.site), w.probe}).second)
      return fail(at + ".probe: " + w.probe + " answered twice");
    const auto ok = e.find("ok");
    if (ok == e.end() || !ok->is_boolean()) return fail(at + ".ok: must be true or false");
    w.result.ok = ok->get<bool>();
    const auto latency = e.find("latency_ms");
    if (latency == e.end() || !latency->is_number()) return fail(at + ".latency_ms: not a number");
    const double ms = latency->get<double>();
    if (!std::isfinite(ms) || ms < 0 || ms > kMaxLatencyMs)
      return fail(at + ".latency_ms: out of range");
    w.result.latency_ms = ms;
    const auto error = e.find("error");
    if (error != e.end() && !error->is_string() && !error->is_null())
      return fail(at + ".error: must be a string");
    if (error != e.end() && error->is_string())
      w.result.error = clean_text(error->get<std::string>());
    if (w.result.ok) w.result.error.clear();
    if (!w.result.ok && w.result.error.empty())
      w.result.error = "failed (no detail from the agent)";
    out.results.push_back(std::move(w));
  }
  out.ok = true;
  return out;
}

}  // namespace fo::probes::agent
