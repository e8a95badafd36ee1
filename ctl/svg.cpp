// SVG timeline renderer (see svg.hpp). Layout: a title, then one panel per group (transition
// labels, the health plot, the served-site band, the time axis), then a legend.
#include "ctl/svg.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <limits>

namespace fo::ctl::svg {
namespace {

constexpr int kWidth = 1100;
constexpr int kLeft = 64;  // room for the "100%" labels and "serving"
constexpr int kRight = 24;
constexpr int kPlotWidth = kWidth - kLeft - kRight;
constexpr int kHeaderHeight = 60;
// Within a panel (y from the panel's top).
constexpr int kGroupY = 18;
constexpr int kLabelRowY[] = {46, 34};  // transition labels: the lower row first
constexpr int kPlotTop = 52;
constexpr int kPlotHeight = 200;
constexpr int kBandTop = kPlotTop + kPlotHeight + 8;
constexpr int kBandHeight = 18;
constexpr int kTickY = kBandTop + kBandHeight + 16;
constexpr int kPanelHeight = kTickY + 28;
constexpr int kLegendHeight = 44;
constexpr double kCharWidth = 6.2;  // average advance of the 10-11 px sans-serif labels
constexpr int kMaxTicks = 8;

constexpr const char* kPrimaryColor = "#1f77b4";
constexpr const char* kSecondaryColor = "#2ca02c";
constexpr const char* kPrimaryBand = "#aec7e8";
constexpr const char* kSecondaryBand = "#98df8a";
constexpr const char* kUnknownFill = "#e3e3e3";
constexpr const char* kReplacement = "\xEF\xBF\xBD";

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string attr(std::string_view name, std::string_view value) {
  return " " + std::string(name) + "=\"" + xml_escape(value) + "\"";
}

struct Scale {
  int64_t start, end;
  double x(int64_t ts) const {
    const double f = double(ts - start) / double(end - start);
    return kLeft + std::clamp(f, 0.0, 1.0) * kPlotWidth;
  }
  static double y(double v) { return kPlotTop + (1.0 - std::clamp(v, 0.0, 1.0)) * kPlotHeight; }
};

std::tm utc_tm(int64_t ms) {
  const int64_t floor_s = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  const std::time_t secs = static_cast<std::time_t>(floor_s);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return tm;
}

std::string strftime_utc(int64_t ms, const char* format) {
  const std::tm tm = utc_tm(ms);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

std::string offset_label(int64_t ms, bool seconds) {
  const char* sign = ms < 0 ? "-" : "+";
  const int64_t s = (ms < 0 ? -ms : ms) / 1000;
  char buf[48];
  if (seconds)
    std::snprintf(buf, sizeof buf, "%s%" PRId64 ":%02" PRId64 ":%02" PRId64, sign, s / 3600,
                  s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%s%" PRId64 ":%02" PRId64, sign, s / 3600, s / 60 % 60);
  return buf;
}

int64_t tick_step(int64_t range_ms) {
  static constexpr int64_t kSteps[] = {
      1000,     2000,     5000,      10000,     15000,      30000,      60000,     120000,
      300000,   600000,   900000,    1800000,   3600000,    7200000,    10800000,  21600000,
      43200000, 86400000, 172800000, 604800000, 1209600000, 2592000000, 7776000000};
  for (int64_t step : kSteps)
    if (range_ms / step <= kMaxTicks) return step;
  const int64_t day = 86400000;
  return (range_ms / kMaxTicks / day + 1) * day;
}

int64_t floor_div(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

// Label lines of the time-axis ticks: the time, and below it the date where it changes.
std::string ticks(const Chart& chart, const Scale& s) {
  const int64_t step = tick_step(s.end - s.start);
  std::string out;
  std::string last_date;
  for (int64_t t = (floor_div(s.start - 1, step) + 1) * step; t <= s.end; t += step) {
    const double x = s.x(t);
    std::string line1, line2;
    if (chart.axis == TimeAxis::utc) {
      const std::string date = strftime_utc(t, "%Y-%m-%d");
      if (step >= 86400000) {
        line1 = date;
      } else {
        line1 = strftime_utc(t, step < 60000 ? "%H:%M:%S" : "%H:%M");
        if (date != last_date) line2 = date;
      }
      last_date = date;
    } else {
      line1 = step >= 86400000 ? "+" + std::to_string(t / 86400000) + "d"
                               : offset_label(t, step < 60000);
    }
    out += "<line x1=\"" + num(x) + "\" y1=\"" + std::to_string(kPlotTop) + "\" x2=\"" + num(x) +
           "\" y2=\"" + std::to_string(kPlotTop + kPlotHeight) +
           "\" stroke=\"#eeeeee\" stroke-width=\"1\"/>\n";
    // The last label would stick out of the picture: align it to the right edge instead.
    const char* anchor = x > kWidth - kRight - 30 ? "end" : "middle";
    out += "<text class=\"tick\" x=\"" + num(x) + "\" y=\"" + std::to_string(kTickY) +
           "\" text-anchor=\"" + anchor + "\" font-size=\"11\" fill=\"#333333\"" +
           attr("data-ms", std::to_string(t)) + ">" + xml_escape(line1);
    if (!line2.empty())
      out += "<tspan x=\"" + num(x) + "\" dy=\"12\">" + xml_escape(line2) + "</tspan>";
    out += "</text>\n";
  }
  return out;
}

// Where a point's value stops being drawn: at the next point, unless the rounds break there.
int64_t point_end(const Panel& p, size_t i, int64_t chart_end) {
  const HealthPoint& h = p.health[i];
  const int64_t hold = p.break_after_ms > 0 ? p.break_after_ms / 4 : 0;
  if (i + 1 < p.health.size()) {
    const HealthPoint& next = p.health[i + 1];
    if (p.break_after_ms <= 0 || next.ts_ms - h.last_ms <= p.break_after_ms) return next.ts_ms;
  }
  return std::min(h.last_ms + hold, std::max(chart_end, h.last_ms));
}

bool joined(const Panel& p, size_t i) {  // point i+1 continues point i's line
  return i + 1 < p.health.size() &&
         (p.break_after_ms <= 0 || p.health[i + 1].ts_ms - p.health[i].last_ms <= p.break_after_ms);
}

// One site's health as steps: a value holds until the next round; unknown rounds and breaks
// in the rounds leave a hole.
std::string health_path(const Panel& p, const Scale& s, bool primary) {
  auto known = [&](const HealthPoint& h) { return primary ? h.primary_known : h.secondary_known; };
  auto value = [&](const HealthPoint& h) { return primary ? h.primary : h.secondary; };
  std::string d;
  bool open = false;
  for (size_t i = 0; i < p.health.size(); ++i) {
    const HealthPoint& h = p.health[i];
    if (!known(h)) {
      open = false;
      continue;
    }
    const std::string y = num(Scale::y(value(h)));
    d += open ? "V" + y : "M" + num(s.x(h.ts_ms)) + " " + y;
    d += "H" + num(s.x(point_end(p, i, s.end)));
    open = joined(p, i);
  }
  if (d.empty()) return "";
  return std::string("<path class=\"health\"") +
         attr("data-site", primary ? "primary" : "secondary") + " d=\"" + d +
         "\" fill=\"none\" stroke=\"" + (primary ? kPrimaryColor : kSecondaryColor) +
         "\" stroke-width=\"" + (primary ? "3.5" : "1.75") +
         "\" stroke-linejoin=\"round\" stroke-linecap=\"butt\"/>\n";
}

std::string rect(const char* cls, double x0, double y, double x1, int h, const std::string& fill,
                 const std::string& extra = "") {
  return std::string("<rect class=\"") + cls + "\" x=\"" + num(x0) + "\" y=\"" +
         std::to_string(int(y)) + "\" width=\"" + num(std::max(x1 - x0, 0.5)) + "\" height=\"" +
         std::to_string(h) + "\" fill=\"" + fill + "\"" + extra;
}

// Stretches where the primary's health is unknown (too few locations reported).
std::string unknown_areas(const Panel& p, const Scale& s) {
  std::string out;
  for (size_t i = 0; i < p.health.size(); ++i) {
    if (p.health[i].primary_known) continue;
    const size_t first = i;
    while (i + 1 < p.health.size() && !p.health[i + 1].primary_known && joined(p, i)) ++i;
    out += rect("unknown", s.x(p.health[first].ts_ms), kPlotTop, s.x(point_end(p, i, s.end)),
                kPlotHeight, kUnknownFill) +
           "><title>primary health unknown: too few locations reported</title></rect>\n";
  }
  for (const DroppedRange& r : p.dropped) {
    if (r.last_ms < s.start || r.first_ms > s.end) continue;
    out += rect("dropped", s.x(r.first_ms), kPlotTop, s.x(r.last_ms), kPlotHeight, "url(#hatch)") +
           "><title>" + std::to_string(r.dropped) +
           " round summaries dropped (store queue full)</title></rect>\n";
  }
  return out;
}

const char* marker_color(std::string_view to) {
  if (to == "failing_over" || to == "secondary_active") return "#d62728";
  if (to == "failing_back" || to == "primary_active") return "#9467bd";
  if (to == "held") return "#ff7f0e";
  return "#8c564b";  // primary_degraded and anything newer
}

std::string when(const Chart& chart, int64_t ts) {
  return chart.axis == TimeAxis::utc ? strftime_utc(ts, "%Y-%m-%d %H:%M:%S UTC")
                                     : offset_label(ts, true);
}

std::string transitions(const Chart& chart, const Panel& p, const Scale& s) {
  std::string out;
  double row_end[2] = {-1e9, -1e9};  // right edge of the last label in each row
  for (const TransitionMark& t : p.transitions) {
    if (t.ts_ms < s.start || t.ts_ms > s.end) continue;
    const double x = s.x(t.ts_ms);
    const char* color = marker_color(t.to);
    out += "<g class=\"transition\"" + attr("data-to", t.to) +
           attr("data-ms", std::to_string(t.ts_ms)) + "><title>" +
           xml_escape(when(chart, t.ts_ms) + ": " + t.from + " \u2192 " + t.to) +
           (t.reason.empty() ? "" : "\n" + xml_escape(t.reason)) + "</title>";
    out += "<line x1=\"" + num(x) + "\" y1=\"" + std::to_string(kPlotTop - 8) + "\" x2=\"" +
           num(x) + "\" y2=\"" + std::to_string(kBandTop + kBandHeight) + "\" stroke=\"" + color +
           "\" stroke-width=\"1.25\" stroke-dasharray=\"4 3\"/>";
    // Labels that would overlap the previous one go to the upper row, or are left out (the
    // marker and its tooltip stay).
    const std::string label = "\u2192 " + t.to;
    const double width = (t.to.size() + 2) * kCharWidth;
    const double lx = std::min(x + 2, double(kWidth - kRight) - width);
    for (int row = 0; row < 2; ++row) {
      if (lx < row_end[row] + 6) continue;
      out += "<text x=\"" + num(lx) + "\" y=\"" + std::to_string(kLabelRowY[row]) +
             "\" font-size=\"10\" fill=\"" + color + "\">" + xml_escape(label) + "</text>";
      row_end[row] = lx + width;
      break;
    }
    out += "</g>\n";
  }
  return out;
}

// The band under the plot: which site served, segment by segment.
std::string served_band(const Panel& p, const Scale& s) {
  struct Segment {
    int64_t from, to;
    std::string site;
  };
  std::vector<Segment> segments{{s.start, s.end, p.served_at_start}};
  for (const ServedChange& c : p.served) {
    if (c.ts_ms > s.end) break;
    Segment& last = segments.back();
    if (c.site == last.site) continue;
    if (c.ts_ms <= last.from) {  // at or before the start: it is the site at the start
      last.site = c.site;
      if (segments.size() > 1 && segments[segments.size() - 2].site == last.site) {
        segments[segments.size() - 2].to = s.end;
        segments.pop_back();
      }
      continue;
    }
    last.to = c.ts_ms;
    segments.push_back({c.ts_ms, s.end, c.site});
  }
  std::string out = "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" +
                    std::to_string(kBandTop + 13) +
                    "\" text-anchor=\"end\" font-size=\"10\" fill=\"#555555\">serving</text>\n";
  for (const Segment& seg : segments) {
    const std::string site = seg.site.empty() ? "unknown" : seg.site;
    const char* fill = site == "primary"     ? kPrimaryBand
                       : site == "secondary" ? kSecondaryBand
                                             : kUnknownFill;
    const double x0 = s.x(seg.from), x1 = s.x(seg.to);
    out += rect("served", x0, kBandTop, x1, kBandHeight, fill, attr("data-site", site)) +
           "><title>" + xml_escape(site) + " served</title></rect>";
    if (x1 - x0 >= site.size() * kCharWidth + 8)
      out += "<text x=\"" + num(x0 + 4) + "\" y=\"" + std::to_string(kBandTop + 13) +
             "\" font-size=\"10\" fill=\"#333333\">" + xml_escape(site) + "</text>";
    out += "\n";
  }
  return out;
}

std::string panel(const Chart& chart, const Panel& p, const Scale& s, int top) {
  std::string out = "<g class=\"panel\"" + attr("data-group", p.group) +
                    " transform=\"translate(0," + std::to_string(top) + ")\">\n";
  out += "<text x=\"" + std::to_string(kLeft) + "\" y=\"" + std::to_string(kGroupY) +
         "\" font-size=\"13\" font-weight=\"bold\">group " + xml_escape(p.group) +
         (p.note.empty()
              ? ""
              : "<tspan dx=\"10\" font-weight=\"normal\" fill=\"#666666\" font-size=\"11\">" +
                    xml_escape(p.note) + "</tspan>") +
         "</text>\n";
  out += "<rect x=\"" + std::to_string(kLeft) + "\" y=\"" + std::to_string(kPlotTop) +
         "\" width=\"" + std::to_string(kPlotWidth) + "\" height=\"" + std::to_string(kPlotHeight) +
         "\" fill=\"#ffffff\" stroke=\"#999999\"/>\n";
  out += unknown_areas(p, s);
  out += ticks(chart, s);
  for (int pct = 0; pct <= 100; pct += 25) {
    const std::string y = num(Scale::y(pct / 100.0));
    if (pct > 0 && pct < 100)
      out += "<line x1=\"" + std::to_string(kLeft) + "\" y1=\"" + y + "\" x2=\"" +
             std::to_string(kLeft + kPlotWidth) + "\" y2=\"" + y +
             "\" stroke=\"#eeeeee\" stroke-width=\"1\"/>\n";
    out += "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" + num(Scale::y(pct / 100.0) + 4) +
           "\" text-anchor=\"end\" font-size=\"10\" fill=\"#555555\">" + std::to_string(pct) +
           "%</text>\n";
  }
  out += health_path(p, s, true);
  out += health_path(p, s, false);
  out += served_band(p, s);
  out += transitions(chart, p, s);
  return out + "</g>\n";
}

std::string legend(int top) {
  struct Item {
    std::string swatch;
    const char* text;
  };
  auto line = [](const char* color, const char* width, const char* dash) {
    return std::string("<line x1=\"0\" y1=\"-4\" x2=\"22\" y2=\"-4\" stroke=\"") + color +
           "\" stroke-width=\"" + width + "\"" +
           (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : "") + "/>";
  };
  auto box = [](const char* fill) {
    return std::string("<rect x=\"0\" y=\"-10\" width=\"22\" height=\"10\" fill=\"") + fill +
           "\" stroke=\"#999999\" stroke-width=\"0.5\"/>";
  };
  const Item items[] = {
      {line(kPrimaryColor, "3.5", ""), "primary health"},
      {line(kSecondaryColor, "1.75", ""), "secondary health"},
      {box(kUnknownFill), "primary health unknown"},
      {box("url(#hatch)"), "rounds dropped"},
      {box(kPrimaryBand), "primary served"},
      {box(kSecondaryBand), "secondary served"},
      {line("#d62728", "1.25", "4 3"), "transition"},
  };
  std::string out = "<g class=\"legend\" font-size=\"11\" fill=\"#333333\">\n";
  double x = kLeft;
  int y = top + 18;
  for (const Item& item : items) {
    const double w = 30 + std::string_view(item.text).size() * kCharWidth + 18;
    if (x + w > kWidth - kRight) {
      x = kLeft;
      y += 18;
    }
    out += "<g transform=\"translate(" + num(x) + "," + std::to_string(y) + ")\">" + item.swatch +
           "<text x=\"28\" y=\"0\">" + item.text + "</text></g>\n";
    x += w;
  }
  return out + "</g>\n";
}

// Decodes one UTF-8 sequence at s[i]; returns its length, or 0 when invalid.
size_t utf8_length(std::string_view s, size_t i, uint32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n;
  if (c < 0x80) {
    cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_length(text, i, cp);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    switch (cp) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if ((cp < 0x20 && cp != '\t' && cp != '\n') || cp == 0xFFFE || cp == 0xFFFF)
          out += kReplacement;
        else
          out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string render_timeline_svg(const Chart& chart) {
  Scale s{chart.start_ms, chart.end_ms};
  if (s.end <= s.start) s.end = s.start + 60000;
  const int panels_height = int(chart.panels.size()) * kPanelHeight;
  const int height = kHeaderHeight + panels_height + kLegendHeight;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(kWidth) +
         "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(kWidth) +
         " " + std::to_string(height) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  out +=
      "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f2f2f2\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#9a9a9a\" stroke-width=\"2\"/>"
      "</pattern></defs>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#fafafa\"/>\n";
  out += "<text x=\"" + std::to_string(kLeft) +
         "\" y=\"26\" font-size=\"16\" font-weight=\"bold\">" + xml_escape(chart.title) +
         "</text>\n";
  const std::string range = chart.axis == TimeAxis::utc
                                ? strftime_utc(s.start, "%Y-%m-%d %H:%M:%S") + " \u2013 " +
                                      strftime_utc(s.end, "%Y-%m-%d %H:%M:%S") + " (times in UTC)"
                                : offset_label(s.start, true) + " \u2013 " +
                                      offset_label(s.end, true) +
                                      " (time from the start of the timeline)";
  out += "<text class=\"range\" x=\"" + std::to_string(kLeft) +
         "\" y=\"46\" font-size=\"11\" fill=\"#555555\">" + xml_escape(range) + "</text>\n";
  for (size_t i = 0; i < chart.panels.size(); ++i)
    out += panel(chart, chart.panels[i], s, kHeaderHeight + int(i) * kPanelHeight);
  out += legend(kHeaderHeight + panels_height);
  return out + "</svg>\n";
}

HealthReducer::HealthReducer(size_t max_points) : max_points_(std::max<size_t>(max_points, 2)) {
  points_.reserve(2 * max_points_);
}

void HealthReducer::add(const HealthPoint& round) {
  if (!points_.empty()) {
    const int64_t gap = round.ts_ms - points_.back().last_ms;
    if (gap > 0) {
      int bucket = 0;
      while (bucket < 63 && (int64_t(1) << (bucket + 1)) <= gap) ++bucket;
      ++spacing_[bucket];
    }
  }
  HealthPoint p = round;
  p.last_ms = std::max(p.last_ms, p.ts_ms);
  points_.push_back(p);
  ++rounds_;
  if (points_.size() >= 2 * max_points_) halve();
}

void HealthReducer::halve() {
  auto merge = [](HealthPoint& a, const HealthPoint& b) {
    auto worst = [](double& v, bool& known, double other, bool other_known) {
      if (!other_known) return;
      v = known ? std::min(v, other) : other;
      known = true;
    };
    worst(a.primary, a.primary_known, b.primary, b.primary_known);
    worst(a.secondary, a.secondary_known, b.secondary, b.secondary_known);
    a.last_ms = std::max(a.last_ms, b.last_ms);
  };
  size_t out = 0;
  for (size_t i = 0; i < points_.size(); i += 2) {
    HealthPoint p = points_[i];
    if (i + 1 < points_.size()) merge(p, points_[i + 1]);
    points_[out++] = p;
  }
  points_.resize(out);
}

int64_t HealthReducer::break_after_ms() const {
  uint64_t total = 0;
  for (uint64_t c : spacing_) total += c;
  if (total == 0) return 0;
  uint64_t seen = 0;
  for (size_t b = 0; b < spacing_.size(); ++b) {
    seen += spacing_[b];
    if (2 * seen >= total)
      return b >= 60 ? std::numeric_limits<int64_t>::max() : int64_t(4) << (b + 1);
  }
  return 0;
}

std::vector<HealthPoint> HealthReducer::take() {
  std::vector<HealthPoint> out = std::move(points_);
  points_.clear();
  return out;
}

}  // namespace fo::ctl::svg
