// Metric families and the Prometheus text format 0.0.4 renderer.
#include "daemon/metrics/registry.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace fo::metrics {
namespace {

bool valid_metric_name(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool valid_label_name(std::string_view s) {
  if (s.empty() || s.substr(0, 2) == "__") return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not valid.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  // Overlong forms, surrogates and values beyond U+10FFFF are invalid.
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// Label values must be valid UTF-8 (invalid bytes become U+FFFD) and bounded in size.
std::string sanitize_value(std::string_view v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    const std::size_t n = utf8_sequence(v, i);
    const std::string_view piece = n ? v.substr(i, n) : std::string_view("\xEF\xBF\xBD");
    if (out.size() + piece.size() > kMaxLabelValueBytes) break;
    out += piece;
    i += n ? n : 1;
  }
  return out;
}

bool needs_sanitizing(std::string_view v) {
  if (v.size() > kMaxLabelValueBytes) return true;
  for (std::size_t i = 0; i < v.size();) {
    const std::size_t n = utf8_sequence(v, i);
    if (n == 0) return true;
    i += n;
  }
  return false;
}

template <class A, class B>
bool less_keys(const A& a, const B& b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](std::string_view x, std::string_view y) { return x < y; });
}

}  // namespace

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Integral values below 2^53 are exact; print them without an exponent ("1000000").
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    auto r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
    return std::string(buf, r.ptr);
  }
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

namespace detail {

bool KeyLess::operator()(const std::vector<std::string>& a, Values b) const {
  return less_keys(a, b);
}
bool KeyLess::operator()(Values a, const std::vector<std::string>& b) const {
  return less_keys(a, b);
}

template <class Series>
Series* SeriesMap<Series>::find_or_add(Values values, std::size_t cap, const Series& init) {
  if (auto it = map_.find(values); it != map_.end()) return &it->second;
  std::vector<std::string> key;
  key.reserve(values.size());
  bool sanitized = false;
  for (std::string_view v : values) {
    if (needs_sanitizing(v)) {
      key.push_back(sanitize_value(v));
      sanitized = true;
    } else {
      key.emplace_back(v);
    }
  }
  if (sanitized)
    if (auto it = map_.find(key); it != map_.end()) return &it->second;
  if (map_.size() >= cap) return nullptr;
  return &map_.emplace(std::move(key), init).first->second;
}

template <class Series>
const Series* SeriesMap<Series>::find(Values values) const {
  auto it = map_.find(values);
  return it == map_.end() ? nullptr : &it->second;
}

template <class Series>
std::size_t SeriesMap<Series>::remove_matching(std::size_t index, std::string_view value) {
  return std::erase_if(map_, [&](const auto& kv) { return kv.first[index] == value; });
}

template <class Series>
bool SeriesMap<Series>::remove(Values values) {
  auto it = map_.find(values);
  if (it == map_.end()) return false;
  map_.erase(it);
  return true;
}

}  // namespace detail

// ---- Family ----

Family::Family(Registry& owner, std::string name, std::string help, std::vector<std::string> labels)
    : owner_(owner), name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)) {}

void Family::write_series_name(std::string& out, std::string_view suffix,
                               const std::vector<std::string>& values,
                               std::string_view extra) const {
  out += name_;
  out += suffix;
  if (values.empty() && extra.empty()) return;
  out += '{';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += labels_[i];
    out += "=\"";
    out += escape_label_value(values[i]);
    out += '"';
  }
  if (!extra.empty()) {
    if (!values.empty()) out += ',';
    out += extra;
  }
  out += '}';
}

bool Family::check_arity(Values values) const {
  // A wrong label count is a programming error; dropping the sample beats corrupting output.
  return values.size() == labels_.size();
}

void Family::note_dropped() const {
  owner_.count_dropped(name_);
}

std::size_t Family::max_series() const {
  // The drop counter has one series per family and must never drop (nor count) itself.
  return this == owner_.dropped_ ? SIZE_MAX : owner_.max_series_;
}

std::optional<std::size_t> Family::label_index(std::string_view label) const {
  for (std::size_t i = 0; i < labels_.size(); ++i)
    if (labels_[i] == label) return i;
  return std::nullopt;
}

// ---- Counter ----

void CounterFamily::inc(Values values, double by) {
  if (!check_arity(values) || !(by >= 0)) return;
  if (double* s = series_.find_or_add(values, max_series(), 0.0))
    *s += by;
  else
    note_dropped();
}

void CounterFamily::set(Values values, double total) {
  if (!check_arity(values) || std::isnan(total)) return;
  if (double* s = series_.find_or_add(values, max_series(), 0.0))
    *s = total;
  else
    note_dropped();
}

std::optional<double> CounterFamily::value(Values values) const {
  const double* s = series_.find(values);
  return s ? std::optional<double>(*s) : std::nullopt;
}

std::size_t CounterFamily::remove_matching(std::string_view label, std::string_view value) {
  auto i = label_index(label);
  return i ? series_.remove_matching(*i, value) : 0;
}

void CounterFamily::render_series(std::string& out) const {
  for (const auto& [key, v] : series_.map()) {
    write_series_name(out, "", key);
    out += ' ';
    out += format_value(v);
    out += '\n';
  }
}

// ---- Gauge ----

void GaugeFamily::set(Values values, double v) {
  if (!check_arity(values)) return;
  if (double* s = series_.find_or_add(values, max_series(), 0.0))
    *s = v;
  else
    note_dropped();
}

void GaugeFamily::add(Values values, double delta) {
  if (!check_arity(values)) return;
  if (double* s = series_.find_or_add(values, max_series(), 0.0))
    *s += delta;
  else
    note_dropped();
}

bool GaugeFamily::remove(Values values) {
  return check_arity(values) && series_.remove(values);
}

std::optional<double> GaugeFamily::value(Values values) const {
  const double* s = series_.find(values);
  return s ? std::optional<double>(*s) : std::nullopt;
}

std::size_t GaugeFamily::remove_matching(std::string_view label, std::string_view value) {
  auto i = label_index(label);
  return i ? series_.remove_matching(*i, value) : 0;
}

void GaugeFamily::render_series(std::string& out) const {
  for (const auto& [key, v] : series_.map()) {
    write_series_name(out, "", key);
    out += ' ';
    out += format_value(v);
    out += '\n';
  }
}

// ---- Histogram ----

HistogramFamily::HistogramFamily(Registry& owner, std::string name, std::string help,
                                 std::vector<std::string> labels, std::vector<double> bounds)
    : Family(owner, std::move(name), std::move(help), std::move(labels)),
      bounds_(std::move(bounds)) {
  for (double b : bounds_) bound_labels_.push_back("le=\"" + format_value(b) + "\"");
  bound_labels_.push_back("le=\"+Inf\"");
}

void HistogramFamily::observe(Values values, double v) {
  if (!check_arity(values) || std::isnan(v)) return;
  Series* s = series_.find_or_add(values, max_series(),
                                  Series{std::vector<uint64_t>(bounds_.size() + 1, 0), 0, 0});
  if (!s) {
    note_dropped();
    return;
  }
  // Buckets are "less than or equal": a value on a bound belongs to that bound's bucket.
  const auto idx =
      std::size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++s->counts[idx];
  s->sum += v;
  ++s->count;
}

std::optional<HistogramFamily::Snapshot> HistogramFamily::snapshot(Values values) const {
  const Series* s = series_.find(values);
  if (!s) return std::nullopt;
  Snapshot snap;
  uint64_t running = 0;
  for (uint64_t c : s->counts) snap.cumulative.push_back(running += c);
  snap.sum = s->sum;
  snap.count = s->count;
  return snap;
}

std::size_t HistogramFamily::remove_matching(std::string_view label, std::string_view value) {
  auto i = label_index(label);
  return i ? series_.remove_matching(*i, value) : 0;
}

void HistogramFamily::render_series(std::string& out) const {
  for (const auto& [key, s] : series_.map()) {
    uint64_t running = 0;
    for (std::size_t b = 0; b < s.counts.size(); ++b) {
      running += s.counts[b];
      write_series_name(out, "_bucket", key, bound_labels_[b]);
      out += ' ';
      out += std::to_string(running);
      out += '\n';
    }
    write_series_name(out, "_sum", key);
    out += ' ';
    out += format_value(s.sum);
    out += '\n';
    write_series_name(out, "_count", key);
    out += ' ';
    out += std::to_string(s.count);
    out += '\n';
  }
}

// ---- Registry ----

Registry::Registry(std::size_t max_series_per_family) : max_series_(max_series_per_family) {
  dropped_ = &counter(std::string(kDroppedFamily),
                      "New series refused because their family already had the maximum number "
                      "of series.",
                      {"family"});
}

Registry::~Registry() = default;

void Registry::check_new_name(const std::string& name,
                              const std::vector<std::string>& labels) const {
  if (!valid_metric_name(name)) throw std::invalid_argument("invalid metric name '" + name + "'");
  for (const auto& f : families_)
    if (f->name() == name) throw std::invalid_argument("metric '" + name + "' registered twice");
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (!valid_label_name(labels[i]))
      throw std::invalid_argument("metric '" + name + "': invalid label name '" + labels[i] + "'");
    for (std::size_t j = 0; j < i; ++j)
      if (labels[j] == labels[i])
        throw std::invalid_argument("metric '" + name + "': label '" + labels[i] + "' twice");
  }
}

template <class F>
F& Registry::add(std::unique_ptr<F> family) {
  F& ref = *family;
  families_.push_back(std::move(family));
  // Known from the start, so that increase() works from the very first drop.
  if (dropped_) dropped_->set({ref.name()}, 0);
  return ref;
}

CounterFamily& Registry::counter(std::string name, std::string help,
                                 std::vector<std::string> labels) {
  check_new_name(name, labels);
  if (!ends_with(name, "_total"))
    throw std::invalid_argument("counter '" + name + "' must end in _total");
  return add(std::unique_ptr<CounterFamily>(
      new CounterFamily(*this, std::move(name), std::move(help), std::move(labels))));
}

GaugeFamily& Registry::gauge(std::string name, std::string help, std::vector<std::string> labels) {
  check_new_name(name, labels);
  return add(std::unique_ptr<GaugeFamily>(
      new GaugeFamily(*this, std::move(name), std::move(help), std::move(labels))));
}

HistogramFamily& Registry::histogram(std::string name, std::string help,
                                     std::vector<std::string> labels,
                                     std::vector<double> bucket_bounds) {
  check_new_name(name, labels);
  for (const auto& l : labels)
    if (l == "le") throw std::invalid_argument("histogram '" + name + "': label 'le' is reserved");
  if (bucket_bounds.empty())
    throw std::invalid_argument("histogram '" + name + "' needs at least one bucket");
  for (std::size_t i = 0; i < bucket_bounds.size(); ++i) {
    if (!std::isfinite(bucket_bounds[i]) || (i > 0 && bucket_bounds[i] <= bucket_bounds[i - 1]))
      throw std::invalid_argument("histogram '" + name +
                                  "': bucket bounds must be finite and strictly increasing");
  }
  return add(std::unique_ptr<HistogramFamily>(new HistogramFamily(
      *this, std::move(name), std::move(help), std::move(labels), std::move(bucket_bounds))));
}

void Registry::count_dropped(const std::string& family) {
  dropped_->inc({family});
}

uint64_t Registry::dropped(std::string_view family) const {
  auto v = dropped_->value({family});
  return v ? static_cast<uint64_t>(*v) : 0;
}

void Registry::render(std::string& out) const {
  // The drop counter goes last: it is bookkeeping, and mostly zeros.
  for (const auto& f : families_)
    if (f.get() != dropped_) render_family(*f, out);
  render_family(*dropped_, out);
}

void Registry::render_family(const Family& f, std::string& out) {
  if (f.size() == 0) return;
  out += "# HELP ";
  out += f.name();
  out += ' ';
  out += escape_help(f.help_);
  out += "\n# TYPE ";
  out += f.name();
  out += ' ';
  out += f.type();
  out += '\n';
  f.render_series(out);
}

std::string Registry::render() const {
  std::string out;
  render(out);
  return out;
}

}  // namespace fo::metrics
