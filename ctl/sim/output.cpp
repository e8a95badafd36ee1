// JSON lines (`--json`, key order as documented in docs/simulate.md) or tables.
#include "ctl/sim/output.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace fo::sim::detail {
namespace {

using Json = nlohmann::ordered_json;

// Seconds as a JSON number: an integer when whole, else fractional.
Json seconds(int64_t ms) {
  if (ms % 1000 == 0) return Json(ms / 1000);
  return Json(static_cast<double>(ms) / 1000.0);
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string offset_text(core::Instant t) {
  int64_t ms = core::to_ms(t);
  const char* sign = ms < 0 ? "-" : "+";
  if (ms < 0) ms = -ms;
  const int64_t s = ms / 1000;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%02" PRId64 ":%02" PRId64 ":%02" PRId64, sign, s / 3600,
                s / 60 % 60, s % 60);
  std::string out = buf;
  if (ms % 1000 != 0) {
    std::snprintf(buf, sizeof buf, ".%03" PRId64, ms % 1000);
    out += buf;
  }
  return out;
}

std::string utc_text(int64_t epoch_ms) {
  const std::time_t secs = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  std::string out = buf;
  if (epoch_ms % 1000 != 0) {
    std::snprintf(buf, sizeof buf, ".%03" PRId64, epoch_ms % 1000);
    out += buf;
  }
  return out;
}

EventPrinter::EventPrinter(std::ostream& out, const SimOptions& options,
                           const std::vector<std::string>& groups,
                           std::optional<int64_t> replay_base_ms)
    : out_(out), options_(options), base_ms_(replay_base_ms) {
  for (const auto& g : groups) group_width_ = std::max(group_width_, g.size());
}

void EventPrinter::table_header() {
  if (header_done_) return;
  header_done_ = true;
  out_ << pad("time", 12);
  if (base_ms_) out_ << pad("when (UTC)", 21);
  out_ << pad("group", group_width_ + 2) << pad("event", 12) << "details\n";
}

void EventPrinter::event(const core::SimEvent& e) {
  using Kind = core::SimEvent::Kind;
  if (options_.observer) options_.observer(e);
  if (e.kind == Kind::round) return;
  const int64_t ms = core::to_ms(e.t);
  if (options_.json) {
    Json j;
    j["t"] = seconds(ms);
    if (base_ms_) j["ts_ms"] = *base_ms_ + ms;
    j["group"] = e.group;
    if (e.kind == Kind::transition) {
      j["event"] = "transition";
      j["from"] = core::to_string(e.from);
      j["to"] = core::to_string(e.to);
      j["reason"] = e.reason;
    } else {
      j["event"] = "action";
      j["phase"] = core::to_string(e.phase);
      j["step"] = e.step.empty() ? Json(nullptr) : Json(e.step);
    }
    out_ << j.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
    return;
  }
  table_header();
  out_ << pad(offset_text(e.t), 12);
  if (base_ms_) out_ << pad(utc_text(*base_ms_ + ms), 21);
  out_ << pad(e.group, group_width_ + 2);
  if (e.kind == Kind::transition) {
    out_ << pad("transition", 12) << core::to_string(e.from) << " -> " << core::to_string(e.to)
         << ": " << e.reason << '\n';
  } else {
    out_ << pad("action", 12) << core::to_string(e.phase) << ": "
         << (e.step.empty() ? std::string("(no steps configured)") : e.step) << '\n';
  }
}

void EventPrinter::summaries(const std::vector<core::SimSummary>& all) {
  if (options_.json) {
    for (const auto& s : all) {
      Json j;
      j["event"] = "summary";
      j["group"] = s.group;
      j["failovers"] = s.failovers;
      j["failbacks"] = s.failbacks;
      j["holds"] = s.holds;
      j["first_warm_t"] = s.first_warm ? seconds(core::to_ms(*s.first_warm)) : Json(nullptr);
      j["downtime_s"] = seconds(s.downtime.count());
      out_ << j.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
    }
    out_.flush();
    return;
  }
  if (!header_done_) out_ << "no transitions and no actions\n";
  out_ << "\n"
       << pad("group", group_width_ + 2) << pad("failovers", 11) << pad("failbacks", 11)
       << pad("holds", 7) << pad("first warm", 14) << "downtime\n";
  for (const auto& s : all) {
    out_ << pad(s.group, group_width_ + 2) << pad(std::to_string(s.failovers), 11)
         << pad(std::to_string(s.failbacks), 11) << pad(std::to_string(s.holds), 7)
         << pad(s.first_warm ? offset_text(*s.first_warm) : "never", 14)
         << core::format_duration(s.downtime) << '\n';
  }
  out_.flush();
}

}  // namespace fo::sim::detail
