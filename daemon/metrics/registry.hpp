// Metric registry and Prometheus text exposition (format 0.0.4), written without a client
// library: counter, gauge and fixed-bucket histogram families, each holding one series per
// label-value set, with a cap on series per family. Loop-thread only: no locks inside.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fo::metrics {

inline constexpr std::size_t kDefaultMaxSeries = 10000;
// Longer label values are cut (at a UTF-8 character boundary).
inline constexpr std::size_t kMaxLabelValueBytes = 256;
inline constexpr std::string_view kDroppedFamily = "failoverd_metrics_series_dropped_total";

// Label values in the order of the family's label names.
using Values = std::initializer_list<std::string_view>;

// Sample value as Prometheus parses it: integers without exponent, "NaN", "+Inf", "-Inf", else
// the shortest text that reads back as the same double.
std::string format_value(double v);
// Escapes for the text format: label values escape \ " and newline; HELP escapes \ and newline.
std::string escape_label_value(std::string_view v);
std::string escape_help(std::string_view v);

namespace detail {
// Orders stored keys and lets lookups use string_views without building a key.
struct KeyLess {
  using is_transparent = void;
  bool operator()(const std::vector<std::string>& a, const std::vector<std::string>& b) const {
    return a < b;
  }
  bool operator()(const std::vector<std::string>& a, Values b) const;
  bool operator()(Values a, const std::vector<std::string>& b) const;
};
}  // namespace detail

class Registry;

class Family {
 public:
  virtual ~Family() = default;
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return labels_; }
  virtual std::size_t size() const = 0;
  // Drops every series whose label `label` equals `value` (e.g. a group removed by a reload).
  // Returns how many were dropped.
  virtual std::size_t remove_matching(std::string_view label, std::string_view value) = 0;

 protected:
  Family(Registry& owner, std::string name, std::string help, std::vector<std::string> labels);
  friend class Registry;
  virtual std::string_view type() const = 0;
  virtual void render_series(std::string& out) const = 0;

  // Writes `name{l1="v1",...[,extra]}` (no braces when there are no labels at all).
  void write_series_name(std::string& out, std::string_view suffix,
                         const std::vector<std::string>& values, std::string_view extra = {}) const;
  bool check_arity(Values values) const;
  // Called when a new series would exceed the cap; counts it as dropped.
  void note_dropped() const;
  std::size_t max_series() const;
  std::optional<std::size_t> label_index(std::string_view label) const;

  Registry& owner_;
  std::string name_, help_;
  std::vector<std::string> labels_;
};

namespace detail {
// The series store shared by all family kinds.
template <class Series>
class SeriesMap {
 public:
  using Map = std::map<std::vector<std::string>, Series, KeyLess>;
  // nullptr when the cap is reached (the caller counts the drop).
  Series* find_or_add(Values values, std::size_t cap, const Series& init);
  const Series* find(Values values) const;
  std::size_t remove_matching(std::size_t index, std::string_view value);
  bool remove(Values values);
  const Map& map() const { return map_; }

 private:
  Map map_;
};
}  // namespace detail

class CounterFamily final : public Family {
 public:
  // Negative or NaN increments are ignored: counters only go up.
  void inc(Values values, double by = 1);
  // Mirrors a total that is counted elsewhere (e.g. the store's written records).
  void set(Values values, double total);
  std::optional<double> value(Values values) const;
  std::size_t size() const override { return series_.map().size(); }
  std::size_t remove_matching(std::string_view label, std::string_view value) override;

 private:
  friend class Registry;
  using Family::Family;
  std::string_view type() const override { return "counter"; }
  void render_series(std::string& out) const override;
  detail::SeriesMap<double> series_;
};

class GaugeFamily final : public Family {
 public:
  void set(Values values, double v);
  void add(Values values, double delta);
  bool remove(Values values);
  std::optional<double> value(Values values) const;
  std::size_t size() const override { return series_.map().size(); }
  std::size_t remove_matching(std::string_view label, std::string_view value) override;

 private:
  friend class Registry;
  using Family::Family;
  std::string_view type() const override { return "gauge"; }
  void render_series(std::string& out) const override;
  detail::SeriesMap<double> series_;
};

class HistogramFamily final : public Family {
 public:
  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bucket bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  // NaN observations are ignored.
  void observe(Values values, double v);
  std::optional<Snapshot> snapshot(Values values) const;
  const std::vector<double>& bounds() const { return bounds_; }
  std::size_t size() const override { return series_.map().size(); }
  std::size_t remove_matching(std::string_view label, std::string_view value) override;

 private:
  friend class Registry;
  struct Series {
    std::vector<uint64_t> counts;  // per bucket, not cumulative; last = above the highest bound
    double sum = 0;
    uint64_t count = 0;
  };
  HistogramFamily(Registry& owner, std::string name, std::string help,
                  std::vector<std::string> labels, std::vector<double> bounds);
  std::string_view type() const override { return "histogram"; }
  void render_series(std::string& out) const override;
  std::vector<double> bounds_;
  std::vector<std::string> bound_labels_;  // le="..." texts, +Inf last
  detail::SeriesMap<Series> series_;
};

class Registry {
 public:
  // Every family holds at most `max_series_per_family` series; further new series are dropped
  // and counted in failoverd_metrics_series_dropped_total{family}.
  explicit Registry(std::size_t max_series_per_family = kDefaultMaxSeries);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registration happens at start-up with fixed names: a bad or duplicate name, a counter
  // without the _total suffix, a reserved label or unsorted buckets throw std::invalid_argument.
  // The references stay valid as long as the registry.
  CounterFamily& counter(std::string name, std::string help, std::vector<std::string> labels);
  GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> labels);
  HistogramFamily& histogram(std::string name, std::string help, std::vector<std::string> labels,
                             std::vector<double> bucket_bounds);

  // Families in registration order, the drop counter last; families without any series are
  // left out.
  std::string render() const;
  void render(std::string& out) const;

  std::size_t max_series_per_family() const { return max_series_; }
  // Series refused so far because a family was full, per family name.
  uint64_t dropped(std::string_view family) const;

 private:
  friend class Family;
  void check_new_name(const std::string& name, const std::vector<std::string>& labels) const;
  template <class F>
  F& add(std::unique_ptr<F> family);
  void count_dropped(const std::string& family);
  static void render_family(const Family& f, std::string& out);

  std::size_t max_series_;
  std::vector<std::unique_ptr<Family>> families_;
  CounterFamily* dropped_ = nullptr;
};

}  // namespace fo::metrics
