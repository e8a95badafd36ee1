// POST /v1/probe body validation (see agent_request.hpp).
#include "daemon/agent/agent_request.hpp"

#include <toml++/toml.h>

#include <cctype>
#include <optional>
#include <set>

#include "daemon/config/config_parts.hpp"
#include "daemon/config/toml_reader.hpp"

namespace fo::agent {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 6;

// JSON value -> TOML node, for the probe tables. Only what a probe table can hold; null and
// deeper nesting are refused here with a message, the rest is up to parse_probe.
std::optional<std::string> to_toml(const json& j, int depth, toml::table& parent,
                                   const std::string& key);

std::optional<std::string> to_toml_array(const json& j, int depth, toml::array& out) {
  for (const json& e : j) {
    if (e.is_string())
      out.push_back(e.get<std::string>());
    else if (e.is_boolean())
      out.push_back(e.get<bool>());
    else if (e.is_number_integer())
      out.push_back(e.get<int64_t>());
    else if (e.is_number_float())
      out.push_back(e.get<double>());
    else if (e.is_object() && depth < kMaxDepth) {
      toml::table t;
      for (const auto& [k, v] : e.items())
        if (auto problem = to_toml(v, depth + 1, t, k)) return problem;
      out.push_back(std::move(t));
    } else {
      return std::string("unsupported value in an array");
    }
  }
  return std::nullopt;
}

std::optional<std::string> to_toml(const json& j, int depth, toml::table& parent,
                                   const std::string& key) {
  if (depth > kMaxDepth) return key + ": nested too deeply";
  if (j.is_string())
    parent.insert(key, j.get<std::string>());
  else if (j.is_boolean())
    parent.insert(key, j.get<bool>());
  else if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX))
    return key + ": number out of range";
  else if (j.is_number_integer())
    parent.insert(key, j.get<int64_t>());
  else if (j.is_number_float())
    parent.insert(key, j.get<double>());
  else if (j.is_array()) {
    toml::array a;
    if (auto problem = to_toml_array(j, depth + 1, a)) return key + ": " + *problem;
    parent.insert(key, std::move(a));
  } else if (j.is_object()) {
    toml::table t;
    for (const auto& [k, v] : j.items())
      if (auto problem = to_toml(v, depth + 1, t, k)) return problem;
    parent.insert(key, std::move(t));
  } else {
    return key + ": null is not a value";
  }
  return std::nullopt;
}

bool valid_probe_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-' &&
        c != '#')
      return false;
  return true;
}

}  // namespace

ProbeRequest parse_probe_request(std::string_view body, const RequestLimits& limits) {
  ProbeRequest out;
  auto bad = [&](std::string why, unsigned status = 400) {
    out.status = status;
    out.error = std::move(why);
    out.probes.clear();
    return out;
  };
  int max_depth = 0;
  const json j = json::parse(
      body,
      [&](int d, json::parse_event_t, json&) {
        max_depth = std::max(max_depth, d);
        return d <= 2 * kMaxDepth;
      },
      false);
  if (j.is_discarded()) return bad("body is not valid JSON");
  if (max_depth > 2 * kMaxDepth) return bad("body is nested too deeply");
  if (!j.is_object()) return bad("body must be a JSON object");
  for (const auto& [key, value] : j.items())
    if (key != "version" && key != "group" && key != "round" && key != "deadline_ms" &&
        key != "probes")
      return bad("unknown key " + config::detail::quote(key));
  const auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() ||
      *version != probes::agent::kProtocolVersion)
    return bad("version must be " + std::to_string(probes::agent::kProtocolVersion));
  const auto group = j.find("group");
  if (group == j.end() || !group->is_string() ||
      !config::detail::valid_name(group->get<std::string>()))
    return bad("group must be a group name (1..64 characters of A-Z a-z 0-9 _ . -)");
  out.group = group->get<std::string>();
  const auto round = j.find("round");
  if (round == j.end() || !round->is_number_unsigned())
    return bad("round must be a non-negative integer");
  out.round = round->get<uint64_t>();
  const auto deadline = j.find("deadline_ms");
  if (deadline == j.end() || !deadline->is_number_integer() || deadline->get<int64_t>() < 1 ||
      deadline->get<int64_t>() > limits.max_deadline.count())
    return bad("deadline_ms must be an integer from 1 to " +
               std::to_string(limits.max_deadline.count()));
  out.deadline = core::Millis(deadline->get<int64_t>());
  const auto list = j.find("probes");
  if (list == j.end() || !list->is_array() || list->empty())
    return bad("probes must be a non-empty array");
  if (list->size() > limits.max_probes)
    return bad("too many probes (" + std::to_string(list->size()) + ", max " +
               std::to_string(limits.max_probes) + ")");
  std::set<std::pair<int, std::string>> names;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& e = (*list)[i];
    const std::string at = "probes[" + std::to_string(i) + "]";
    if (!e.is_object() || e.size() != 2 || !e.contains("site") || !e.contains("probe"))
      return bad(at + ": must be {\"site\": ..., \"probe\": {...}}");
    probes::agent::WireProbe w;
    if (!probes::agent::parse_site(e["site"], w.site))
      return bad(at + ".site: must be \"primary\" or \"secondary\"");
    if (!e["probe"].is_object()) return bad(at + ".probe: must be an object");
    // The name is the daemon's: also a default one like "http#0", which a probe table could
    // not spell. It only has to be a sane key for the results.
    const auto name = e["probe"].find("name");
    if (name == e["probe"].end())
      return bad(at + ".probe.name: required in a request (results are matched by name)");
    if (!name->is_string() || !valid_probe_name(name->get<std::string>()))
      return bad(at + ".probe.name: must be 1..64 characters of A-Z a-z 0-9 _ . - #");
    toml::table table;
    for (const auto& [k, v] : e["probe"].items())
      if (k != "name")
        if (auto problem = to_toml(v, 1, table, k)) return bad(at + ".probe." + *problem);
    config::detail::ErrorSink sink(at);
    w.probe = config::detail::parse_probe(sink, table, "probe", i, std::nullopt);
    w.probe.name = name->get<std::string>();
    if (!sink.empty()) {
      // Positions of an in-memory table mean nothing to the daemon: the messages alone.
      std::string why;
      for (const auto& err : sink.take()) why += (why.empty() ? "" : "; ") + err.message;
      return bad(at + ": " + why);
    }
    if (w.probe.kind == "exec" && !limits.allow_exec)
      return bad(at + ": exec probes are not allowed on this agent (allow_exec = false)", 403);
    if (!names.insert({int(w.site), w.probe.name}).second)
      return bad(at + ".probe.name: " + config::detail::quote(w.probe.name) +
                 " given twice for the " + std::string(core::to_string(w.site)));
    out.probes.push_back(std::move(w));
  }
  return out;
}

}  // namespace fo::agent
