// Table and sentence rendering for failoverctl (see render.hpp).
#include "ctl/render.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>

#include "daemon/core/types.hpp"

namespace fo::ctl {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxCellCodePoints = 200;
constexpr std::size_t kMaxOutputCodePoints = 60;  // action output column
const json kNull;

std::size_t code_points(std::string_view s) {
  return std::size_t(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// Replaces control characters and cuts overlong text at a code point boundary.
std::string clean(std::string_view s, std::size_t max_points = kMaxCellCodePoints) {
  std::string out;
  out.reserve(std::min(s.size(), max_points * 4));
  std::size_t points = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool starts_point = (c & 0xC0) != 0x80;
    if (starts_point && ++points > max_points) {
      out += "...";
      return out;
    }
    out.push_back(c < 0x20 || c == 0x7F ? ' ' : char(c));
  }
  return out;
}

const json& field(const json& object, std::string_view key) {
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

const json& array_field(const json& object, std::string_view key) {
  const json& value = field(object, key);
  static const json kEmpty = json::array();
  return value.is_array() ? value : kEmpty;
}

std::optional<int64_t> int_field(const json& object, std::string_view key) {
  const json& value = field(object, key);
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_unsigned() && value.get<uint64_t>() <= uint64_t(INT64_MAX)) {
    return int64_t(value.get<uint64_t>());
  }
  return std::nullopt;
}

// Any scalar as display text; missing or null is "?".
std::string text(const json& value) {
  if (value.is_string()) return clean(value.get_ref<const std::string&>());
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
  if (value.is_number_float()) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", value.get<double>());
    return buffer;
  }
  if (value.is_null()) return "?";
  return clean(value.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::string text(const json& object, std::string_view key) {
  return text(field(object, key));
}

std::string time_cell(const json& object, std::string_view key, int64_t now_ms) {
  const json& value = field(object, key);
  if (value.is_null() && object.is_object() && object.contains(key)) return "never";
  auto ms = int_field(object, key);
  return ms ? format_time(*ms, now_ms) : "?";
}

std::string age(int64_t ms, int64_t now_ms) {
  const int64_t delta = now_ms - ms;
  if (delta < 1000) return delta < 0 ? "in the future" : "just now";
  return core::format_duration(core::Millis(delta - delta % 1000)) + " ago";
}

std::string quote_arg(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_./=:,@%+").find(c) != std::string_view::npos;
  });
  if (plain) return clean(arg);
  std::string quoted = "'";
  for (char c : arg) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted.push_back(c);
    }
  }
  quoted += "'";
  return clean(quoted);
}

}  // namespace

std::string render_table(const Row& headers, const std::vector<Row>& rows) {
  std::vector<std::size_t> widths(headers.size(), 0);
  auto measure = [&](const Row& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], code_points(clean(row[i])));
    }
  };
  measure(headers);
  for (const Row& row : rows) measure(row);
  std::string out;
  auto emit = [&](const Row& row) {
    std::string line;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? clean(row[i]) : "";
      line += cell;
      if (i + 1 < widths.size()) line.append(widths[i] - code_points(cell) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  emit(headers);
  for (const Row& row : rows) emit(row);
  return out;
}

std::string format_utc(int64_t ms) {
  using namespace std::chrono;
  constexpr int64_t kYear10000Ms = 253402300800000;  // 10000-01-01T00:00:00Z
  if (ms < 0 || ms >= kYear10000Ms) return std::to_string(ms);
  const sys_time<milliseconds> t{milliseconds(ms)};
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{floor<seconds>(t - day)};
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%04d-%02u-%02uT%02d:%02d:%02dZ", int(ymd.year()),
                unsigned(ymd.month()), unsigned(ymd.day()), int(hms.hours().count()),
                int(hms.minutes().count()), int(hms.seconds().count()));
  return buffer;
}

std::string format_time(int64_t ms, int64_t now_ms) {
  std::string out = format_utc(ms);
  if (now_ms > 0) out += " (" + age(ms, now_ms) + ")";
  return out;
}

std::string site_health(const json& site) {
  const auto healthy = int_field(site, "healthy");
  const auto reporting = int_field(site, "reporting");
  const auto configured = int_field(site, "configured");
  const json& known = field(site, "known");
  if (!known.is_boolean()) return "?";
  if (known.get<bool>()) {
    if (!healthy || !reporting) return "?";
    return std::to_string(*healthy) + "/" + std::to_string(*reporting);
  }
  if (!reporting || !configured) return "unknown";
  return "unknown (" + std::to_string(*reporting) + "/" + std::to_string(*configured) + ")";
}

std::string render_status(const json& arguments, int64_t now_ms) {
  std::string out;
  const json& daemon = field(arguments, "daemon");
  if (daemon.is_object()) {
    out += "failoverd " + text(daemon, "version") + " (pid " + text(daemon, "pid") + ")";
    if (auto started = int_field(daemon, "started_ms")) {
      out += ", up since " + format_time(*started, now_ms);
    }
    out += ", config " + text(daemon, "config") + "\n\n";
  }
  const json& groups = array_field(arguments, "groups");
  if (groups.empty()) return out + "no groups configured\n";

  std::vector<Row> rows;
  for (const json& g : groups) {
    rows.push_back({text(g, "name"), text(g, "state"), text(g, "active"),
                    site_health(field(g, "primary")), site_health(field(g, "secondary")),
                    time_cell(g, "since_ms", now_ms), text(g, "reason")});
  }
  out +=
      render_table({"GROUP", "STATE", "ACTIVE", "PRIMARY", "SECONDARY", "SINCE", "REASON"}, rows);

  for (const json& g : groups) {
    out += "\n" + text(g, "name") + ":\n";
    std::vector<Row> details;
    for (const char* site_name : {"primary", "secondary"}) {
      const json& site = field(g, site_name);
      std::string list;
      for (const json& location : array_field(site, "locations")) {
        if (!list.empty()) list += ", ";
        list += text(location, "name") + " " + text(location, "verdict");
        const json& last = field(location, "last_ms");
        if (last.is_null() && location.is_object() && location.contains("last_ms")) {
          list += " (never)";
        } else if (auto last_ms = int_field(location, "last_ms"); last_ms && now_ms > 0) {
          list += " (" + age(*last_ms, now_ms) + ")";
        }
      }
      if (list.empty()) list = site.is_object() ? "no locations" : "?";
      details.push_back({std::string("  ") + site_name, list});
    }
    // Locations with no fresh result for either site; for agents, what went wrong last.
    std::string stale;
    for (const json& location : array_field(g, "locations")) {
      if (field(location, "stale") != true) continue;
      if (!stale.empty()) stale += ", ";
      stale += text(location, "name");
      if (const json& d = field(location, "detail");
          d.is_string() && !d.get_ref<const std::string&>().empty())
        stale += " (" + text(d) + ")";
    }
    if (!stale.empty()) details.push_back({"  stale", stale});
    if (const json& plan = field(g, "plan"); plan.is_object()) {
      details.push_back({"  plan", text(plan, "phase") + " #" + text(plan, "id") + " (" +
                                       text(plan, "initiator") + ")"});
    }
    if (const json& held = field(g, "held_reason");
        held.is_string() && !held.get_ref<const std::string&>().empty()) {
      details.push_back({"  held", text(held)});
    }
    std::string flags;
    if (field(g, "secondary_warm") == true) flags = "secondary warm";
    if (auto below = int_field(g, "rounds_below"); below && *below > 0) {
      if (!flags.empty()) flags += ", ";
      flags += std::to_string(*below) + (*below == 1 ? " round" : " rounds") +
               " below the failover threshold";
    }
    if (!flags.empty()) details.push_back({"  notes", flags});
    // Detail rows are "label  value" without a header line.
    std::string table = render_table({"", ""}, details);
    out += table.substr(table.find('\n') + 1);
  }
  return out;
}

std::string render_history(const json& arguments, int64_t now_ms) {
  if (field(arguments, "transitions").is_array()) {
    const json& list = field(arguments, "transitions");
    if (list.empty()) return "no transitions recorded\n";
    std::vector<Row> rows;
    for (const json& t : list) {
      rows.push_back({time_cell(t, "ts_ms", now_ms), text(t, "group"), text(t, "from"),
                      text(t, "to"), text(t, "initiator"), text(t, "uid"), text(t, "reason")});
    }
    return render_table({"TIME", "GROUP", "FROM", "TO", "INITIATOR", "UID", "REASON"}, rows);
  }
  if (field(arguments, "actions").is_array()) {
    const json& list = field(arguments, "actions");
    if (list.empty()) return "no actions recorded\n";
    std::vector<Row> rows;
    for (const json& a : list) {
      std::string took = "?";
      auto started = int_field(a, "started_ms");
      if (auto ended = int_field(a, "ended_ms"); started && ended && *ended >= *started) {
        took = core::format_duration(core::Millis(*ended - *started));
      } else if (a.is_object() && a.contains("ended_ms") && field(a, "ended_ms").is_null()) {
        took = "running";
      }
      // The first line of the output; the rest is in --json.
      const json& raw_output = field(a, "output");
      std::string output = text(raw_output);
      if (raw_output.is_string()) {
        const std::string& full = raw_output.get_ref<const std::string&>();
        output = clean(std::string_view(full).substr(0, full.find('\n')), kMaxOutputCodePoints);
      }
      rows.push_back({time_cell(a, "started_ms", now_ms), text(a, "group"), text(a, "plan_id"),
                      text(a, "phase"), text(a, "step_index"), text(a, "step_name"),
                      text(a, "attempt"), text(a, "result"), text(a, "exit_code"), took, output});
    }
    return render_table({"STARTED", "GROUP", "PLAN", "PHASE", "STEP", "NAME", "TRY", "RESULT",
                         "EXIT", "TOOK", "OUTPUT"},
                        rows);
  }
  if (field(arguments, "rounds").is_array()) {
    const json& list = field(arguments, "rounds");
    if (list.empty()) return "no rounds recorded\n";
    std::vector<Row> rows;
    for (const json& r : list) {
      rows.push_back({time_cell(r, "ts_ms", now_ms), text(r, "group"), text(r, "state"),
                      site_health(field(r, "primary")), site_health(field(r, "secondary"))});
    }
    return render_table({"TIME", "GROUP", "STATE", "PRIMARY", "SECONDARY"}, rows);
  }
  if (field(arguments, "commands").is_array()) {
    const json& list = field(arguments, "commands");
    if (list.empty()) return "no commands recorded\n";
    std::vector<Row> rows;
    for (const json& c : list) {
      const json& args = field(c, "arguments");
      rows.push_back({time_cell(c, "ts_ms", now_ms), text(c, "group"), text(c, "command"),
                      text(c, "uid"), text(c, "result"),
                      args.is_object() && args.empty() ? "" : text(args)});
    }
    return render_table({"TIME", "GROUP", "COMMAND", "UID", "RESULT", "ARGUMENTS"}, rows);
  }
  return "the reply holds no history\n";
}

std::string render_version(const json& arguments, std::string_view client_version) {
  return "failoverctl " + clean(client_version) + "\nfailoverd " + text(arguments, "version") +
         " (protocol " + text(arguments, "protocol") + ")\n";
}

std::string describe_change(std::string_view verb, std::string_view group, const json& plan,
                            bool force) {
  const std::string name = clean(group);
  if (verb == "hold") {
    return "This will hold group " + name +
           ": automatic failover and failback stop until `failoverctl release " + name + "`.\n";
  }
  if (verb == "release") {
    return "This will release group " + name + ": automatic decisions resume.\n";
  }
  const std::string action = verb == "failover"   ? "fail over"
                             : verb == "failback" ? "fail back"
                                                  : clean(verb);
  std::string out = "This will " + action + " group " + name + " from " + text(plan, "from") +
                    " to " + text(plan, "to");
  const json& steps = array_field(plan, "steps");
  if (steps.empty()) {
    out += "; the plan has no steps.\n";
  } else {
    out += " by running " + std::to_string(steps.size()) +
           (steps.size() == 1 ? " step:\n" : " steps:\n");
    std::size_t position = 0;
    for (const json& step : steps) {
      ++position;
      std::string line = "  " + std::to_string(position) + ". " + text(step, "name");
      for (const json& arg : array_field(step, "argv")) {
        line += " " + (arg.is_string() ? quote_arg(arg.get<std::string>()) : text(arg));
      }
      std::vector<std::string> notes;
      if (auto timeout = int_field(step, "timeout_ms"); timeout && *timeout >= 0) {
        notes.push_back("timeout " + core::format_duration(core::Millis(*timeout)));
      }
      if (auto retries = int_field(step, "retries"); retries && *retries > 0) {
        notes.push_back(std::to_string(*retries) + (*retries == 1 ? " retry" : " retries"));
      }
      if (const json& on_failure = field(step, "on_failure"); on_failure.is_string()) {
        notes.push_back("on failure: " + text(on_failure));
      }
      if (!notes.empty()) {
        line += " (";
        for (std::size_t i = 0; i < notes.size(); ++i) line += (i ? ", " : "") + notes[i];
        line += ")";
      }
      out += line + "\n";
    }
  }
  if (force && verb == "failover") {
    out += "--force: the secondary's health is not checked.\n";
  }
  return out;
}

}  // namespace fo::ctl
