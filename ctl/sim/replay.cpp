// `failoverctl replay`: the round summaries recorded in the SQLite history, read page by page
// (oldest first) and fed to the simulator as per-location verdicts, so a new policy can be
// tried on a past incident. Memory stays flat: one page of rounds at a time.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <ostream>

#include "ctl/sim/groups.hpp"
#include "ctl/sim/output.hpp"
#include "ctl/sim/sim.hpp"
#include "daemon/store/store.hpp"

namespace fo::sim {
namespace {

using detail::EventPrinter;
using detail::GroupLookup;

constexpr size_t kPage = 4096;
constexpr size_t kMaxGapsShown = 20;

// Walks rounds oldest first. A page ends at `limit` rows, possibly in the middle of rows that
// share a timestamp (several groups round at the same millisecond), so the next page starts at
// that timestamp again and skips the rows already seen there.
class RoundPager {
 public:
  RoundPager(store::Store& db, int64_t since_ms, int64_t until_ms)
      : db_(db), since_(since_ms), until_(until_ms) {}

  const store::RoundRecord* next() {
    if (pos_ >= page_.size() && !fetch()) return nullptr;
    const store::RoundRecord& r = page_[pos_++];
    if (seen_at_last_ > 0 && r.ts_ms == last_ts_) {
      ++seen_at_last_;
    } else {
      last_ts_ = r.ts_ms;
      seen_at_last_ = 1;
    }
    return &r;
  }

 private:
  bool fetch() {
    for (;;) {
      if (last_page_) return false;
      const int64_t from = seen_at_last_ > 0 ? last_ts_ : since_;
      page_ = db_.rounds("", from, until_, limit_);
      last_page_ = page_.size() < limit_;
      size_t skip = 0;
      while (skip < page_.size() && skip < seen_at_last_ && page_[skip].ts_ms == last_ts_) ++skip;
      pos_ = skip;
      if (pos_ < page_.size()) return true;
      if (last_page_) return false;
      // A whole page of rows at one timestamp, all seen already: ask for more at once.
      if (limit_ >= store::kMaxReadRows)
        throw store::StoreError("more than " + std::to_string(store::kMaxReadRows) +
                                " rounds share one timestamp");
      limit_ = std::min(limit_ * 2, store::kMaxReadRows);
    }
  }

  store::Store& db_;
  int64_t since_, until_;
  size_t limit_ = kPage;
  std::vector<store::RoundRecord> page_;
  size_t pos_ = 0;
  bool last_page_ = false;
  int64_t last_ts_ = 0;
  size_t seen_at_last_ = 0;
};

struct ReplayCounts {
  size_t rounds = 0;
  size_t unknown_group_rounds = 0;
  std::vector<std::string> unknown_groups;  // first few, for the warning
  size_t unknown_locations = 0;             // verdicts of locations the group no longer has
  size_t malformed = 0;                     // verdict entries that are not "name=h|u|m"
};

// Feeds "ams=h,fra=u,nyc=m" as observations at `at`: h ok, u failed, m no observation.
void feed_verdicts(core::Simulator& sim, const GroupLookup::Entry& g, core::Site site,
                   std::string_view verdicts, core::Instant at, core::Observation& obs,
                   ReplayCounts& counts) {
  while (!verdicts.empty()) {
    const size_t comma = verdicts.find(',');
    std::string_view item = verdicts.substr(0, comma);
    verdicts = comma == std::string_view::npos ? std::string_view() : verdicts.substr(comma + 1);
    const size_t eq = item.rfind('=');
    if (eq == std::string_view::npos || eq + 2 != item.size()) {
      ++counts.malformed;
      continue;
    }
    const char v = item[eq + 1];
    if (v != 'h' && v != 'u' && v != 'm') {
      ++counts.malformed;
      continue;
    }
    const std::string_view location = item.substr(0, eq);
    if (!g.has_location(location)) {
      ++counts.unknown_locations;
      continue;
    }
    if (v == 'm') continue;
    obs.at = at;
    obs.site = site;
    obs.location.assign(location);
    obs.ok = v == 'h';
    sim.observe(*g.name, obs);
  }
}

void warn_gaps(store::Store& db, int64_t since_ms, int64_t until_ms, std::ostream& err) {
  const auto gaps = db.gaps("", since_ms, until_ms, kMaxGapsShown + 1);
  for (size_t i = 0; i < gaps.size() && i < kMaxGapsShown; ++i) {
    const auto& g = gaps[i];
    err << "replay: warning: the history lost " << g.dropped << " round(s) of group " << g.group
        << " between " << detail::utc_text(g.first_ms) << " and " << detail::utc_text(g.last_ms)
        << " UTC; the replay sees missing data there\n";
  }
  if (gaps.size() > kMaxGapsShown) err << "replay: warning: more history gaps not listed\n";
}

void warn_counts(const ReplayCounts& c, std::ostream& err) {
  if (c.unknown_group_rounds > 0)
    err << "replay: warning: ignored " << c.unknown_group_rounds
        << " round(s) of groups not in the config (" << detail::name_list(c.unknown_groups)
        << ")\n";
  if (c.unknown_locations > 0)
    err << "replay: warning: ignored " << c.unknown_locations
        << " verdict(s) from locations the config does not list for their group\n";
  if (c.malformed > 0)
    err << "replay: warning: ignored " << c.malformed << " malformed location verdict(s)\n";
}

int replay(const config::Config& cfg, store::Store& db, const std::string& db_path,
           int64_t since_ms, int64_t until_ms, const SimOptions& options, std::ostream& out,
           std::ostream& err) {
  RoundPager pager(db, since_ms, until_ms);
  const store::RoundRecord* r = pager.next();
  if (!r) {
    err << "replay: " << db_path << ": no rounds recorded in the requested window\n";
    return 1;
  }
  warn_gaps(db, since_ms, until_ms, err);
  const int64_t base = r->ts_ms;
  core::Simulator sim(detail::sim_groups(cfg), core::Instant{});
  sim.record_rounds = static_cast<bool>(options.observer);
  const std::vector<std::string> names = detail::group_names(cfg);
  EventPrinter printer(out, options, names, base);
  GroupLookup lookup(cfg);
  core::Observation obs;
  ReplayCounts counts;
  core::Instant last{};
  for (; r; r = pager.next()) {
    ++counts.rounds;
    last = core::Instant(core::Millis(r->ts_ms - base));
    const GroupLookup::Entry* g = lookup.find(r->group);
    if (!g) {
      if (counts.unknown_groups.size() <= 10 &&
          std::find(counts.unknown_groups.begin(), counts.unknown_groups.end(), r->group) ==
              counts.unknown_groups.end())
        counts.unknown_groups.push_back(r->group);
      ++counts.unknown_group_rounds;
      continue;
    }
    feed_verdicts(sim, *g, core::Site::primary, r->p_locations, last, obs, counts);
    feed_verdicts(sim, *g, core::Site::secondary, r->s_locations, last, obs, counts);
    detail::print_events(sim, printer);
  }
  sim.run_until(last + detail::longest_interval(cfg));
  detail::print_events(sim, printer);
  printer.summaries(sim.summaries());
  err << "replay: " << counts.rounds << " round(s) recorded from " << detail::utc_text(base)
      << " to " << detail::utc_text(base + core::to_ms(last)) << " UTC\n";
  warn_counts(counts, err);
  return 0;
}

}  // namespace

int run_replay(const config::Config& cfg, const std::string& db_path, int64_t since_ms,
               int64_t until_ms, const SimOptions& options, std::ostream& out, std::ostream& err) {
  if (since_ms >= until_ms) {
    err << "replay: the window is empty: since (" << since_ms << ") must be before until ("
        << until_ms << ")\n";
    return 1;
  }
  // Store::open would create a missing database; a replay must never do that.
  struct stat st {};
  if (::stat(db_path.c_str(), &st) != 0) {
    err << "replay: " << db_path << ": " << std::strerror(errno) << '\n';
    return 1;
  }
  if (!S_ISREG(st.st_mode)) {
    err << "replay: " << db_path << ": not a regular file\n";
    return 1;
  }
  try {
    std::unique_ptr<store::Store> db = store::Store::open(db_path);
    return replay(cfg, *db, db_path, since_ms, until_ms, options, out, err);
  } catch (const store::StoreError& e) {
    out.flush();
    err << "replay: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace fo::sim
