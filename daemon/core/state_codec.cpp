// Text form of GroupState for the store: "key=value" lines, values percent-escaped.
// Unknown keys are ignored so that older daemons can read newer state after a downgrade.
#include <charconv>
#include <sstream>

#include "engine.hpp"

namespace fo::core {
namespace {

std::string escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '%' || c == '\n' || c == '\r' || c == '=' || c == ',') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> unescape(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != '%') {
      out += v[i];
      continue;
    }
    if (i + 2 >= v.size()) return std::nullopt;
    unsigned x = 0;
    auto r = std::from_chars(v.data() + i + 1, v.data() + i + 3, x, 16);
    if (r.ec != std::errc() || r.ptr != v.data() + i + 3) return std::nullopt;
    out += static_cast<char>(x);
    i += 2;
  }
  return out;
}

template <typename T>
bool parse_int(std::string_view v, T& out) {
  auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  return r.ec == std::errc() && r.ptr == v.data() + v.size();
}

std::string opt_ms(const std::optional<Instant>& t) {
  return t ? std::to_string(to_ms(*t)) : std::string();
}

bool parse_opt_ms(std::string_view v, std::optional<Instant>& out) {
  if (v.empty()) {
    out.reset();
    return true;
  }
  int64_t ms;
  if (!parse_int(v, ms)) return false;
  out = instant_from_ms(ms);
  return true;
}

}  // namespace

std::string serialize(const GroupState& s) {
  std::ostringstream o;
  o << "v=1\n";
  o << "state=" << to_string(s.state) << "\n";
  o << "active=" << to_string(s.active) << "\n";
  o << "secondary_warm=" << (s.secondary_warm ? 1 : 0) << "\n";
  o << "since=" << to_ms(s.since) << "\n";
  o << "last_transition=" << opt_ms(s.last_transition) << "\n";
  o << "flap_times=";
  for (size_t i = 0; i < s.flap_times.size(); ++i) o << (i ? "," : "") << to_ms(s.flap_times[i]);
  o << "\n";
  o << "rounds_below=" << s.rounds_below << "\n";
  o << "secondary_rounds_below=" << s.secondary_rounds_below << "\n";
  o << "primary_below_warm=" << (s.primary_below_warm ? 1 : 0) << "\n";
  o << "primary_good_since=" << opt_ms(s.primary_good_since) << "\n";
  o << "recovered_since=" << opt_ms(s.recovered_since) << "\n";
  o << "plan_phase=" << (s.plan_phase ? to_string(*s.plan_phase) : "") << "\n";
  o << "plan_id=" << s.plan_id << "\n";
  o << "next_plan_id=" << s.next_plan_id << "\n";
  o << "plan_initiator=" << to_string(s.plan_initiator) << "\n";
  o << "term=" << s.term << "\n";
  o << "held_reason=" << escape(s.held_reason) << "\n";
  return o.str();
}

std::optional<GroupState> deserialize(std::string_view text) {
  GroupState s;
  bool have_version = false, have_state = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view k = line.substr(0, eq), v = line.substr(eq + 1);
    bool ok = true;
    if (k == "v") {
      ok = v == "1";
      have_version = ok;
    } else if (k == "state") {
      auto st = state_from_string(v);
      ok = st.has_value();
      if (ok) s.state = *st;
      have_state = ok;
    } else if (k == "active") {
      auto st = site_from_string(v);
      ok = st.has_value();
      if (ok) s.active = *st;
    } else if (k == "secondary_warm") {
      s.secondary_warm = v == "1";
    } else if (k == "since") {
      int64_t ms;
      ok = parse_int(v, ms);
      if (ok) s.since = instant_from_ms(ms);
    } else if (k == "last_transition") {
      ok = parse_opt_ms(v, s.last_transition);
    } else if (k == "flap_times") {
      while (ok && !v.empty()) {
        size_t c = v.find(',');
        int64_t ms;
        ok = parse_int(v.substr(0, c), ms);
        if (ok) s.flap_times.push_back(instant_from_ms(ms));
        v = c == std::string_view::npos ? std::string_view() : v.substr(c + 1);
      }
    } else if (k == "rounds_below") {
      ok = parse_int(v, s.rounds_below);
    } else if (k == "secondary_rounds_below") {
      ok = parse_int(v, s.secondary_rounds_below);
    } else if (k == "primary_below_warm") {
      s.primary_below_warm = v == "1";
    } else if (k == "primary_good_since") {
      ok = parse_opt_ms(v, s.primary_good_since);
    } else if (k == "recovered_since") {
      ok = parse_opt_ms(v, s.recovered_since);
    } else if (k == "plan_phase") {
      if (v.empty()) {
        s.plan_phase.reset();
      } else {
        auto p = phase_from_string(v);
        ok = p.has_value();
        s.plan_phase = p;
      }
    } else if (k == "plan_id") {
      ok = parse_int(v, s.plan_id);
    } else if (k == "next_plan_id") {
      ok = parse_int(v, s.next_plan_id);
    } else if (k == "plan_initiator") {
      auto i = initiator_from_string(v);
      ok = i.has_value();
      if (ok) s.plan_initiator = *i;
    } else if (k == "term") {
      ok = parse_int(v, s.term);
    } else if (k == "held_reason") {
      auto u = unescape(v);
      ok = u.has_value();
      if (ok) s.held_reason = *u;
    }
    if (!ok) return std::nullopt;
  }
  if (!have_version || !have_state) return std::nullopt;
  if (s.next_plan_id <= s.plan_id) s.next_plan_id = s.plan_id + 1;
  return s;
}

}  // namespace fo::core
