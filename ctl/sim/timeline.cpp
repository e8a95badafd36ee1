// Streaming reader of CSV timelines. Millions of rows go through here, so a row costs no
// allocation: the file is read in large blocks, lines are found with memchr, fields are views
// into the block and numbers are parsed with from_chars.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "ctl/sim/sim.hpp"

namespace fo::sim {
namespace {

constexpr size_t kBlock = 1 << 20;
constexpr std::array<std::string_view, 5> kColumns{"t", "group", "site", "location", "ok"};
enum Field { kT, kGroup, kSite, kLocation, kOk };

struct FdCloser {
  void operator()(const int* fd) const {
    if (*fd >= 0) ::close(*fd);
    delete fd;
  }
};
using UniqueFd = std::unique_ptr<int, FdCloser>;

inline bool blank(char c) {
  return c == ' ' || c == '\t';
}

inline std::string_view trim(std::string_view s) {
  // Fields rarely carry blanks: test the ends before looping.
  if (s.empty() || (!blank(s.front()) && !blank(s.back()))) return s;
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A value from the file, safe to print: quoted, cut, control bytes replaced.
std::string quoted(std::string_view v) {
  constexpr size_t kShown = 40;
  std::string out = "\"";
  for (size_t i = 0; i < v.size() && i < kShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  }
  if (v.size() > kShown) out += "...";
  return out + "\"";
}

class Parser {
 public:
  Parser(const std::string& name, const RowHandler& on_row) : name_(name), on_row_(on_row) {}

  void line(std::string_view text) {
    ++stats_.lines;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.size() > kMaxTimelineLine)
      fail(stats_.lines, "line longer than " + std::to_string(kMaxTimelineLine) + " bytes");
    if (stats_.lines == 1 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    if (trim(text).empty()) return;
    if (!have_header_)
      header(text);
    else
      row(text);
  }

  // The reader found a partial line longer than the limit before its end.
  [[noreturn]] void too_long() {
    fail(stats_.lines + 1, "line longer than " + std::to_string(kMaxTimelineLine) + " bytes");
  }

  TimelineStats finish() {
    if (!have_header_) fail(1, "empty file: expected a header line t,group,site,location,ok");
    return stats_;
  }

  [[noreturn]] void fail(size_t line, const std::string& message) const {
    throw TimelineError(name_ + ":" + std::to_string(line) + ": " + message);
  }

 private:
  // Splits one line into its fields and keeps the ones we read. Returns the number of fields
  // seen (up to the last one needed). Quoted fields ("a,b" with "" for a quote) are accepted so
  // extra columns may hold commas; the needed fields keep their inner text.
  size_t split(std::string_view text, std::array<std::string_view, 5>& out) {
    size_t index = 0, pos = 0;
    for (;;) {
      std::string_view field;
      size_t end;
      size_t start = pos;
      while (start < text.size() && (text[start] == ' ' || text[start] == '\t')) ++start;
      if (start < text.size() && text[start] == '"') {
        size_t q = start + 1;
        for (;;) {
          const void* hit = std::memchr(text.data() + q, '"', text.size() - q);
          if (!hit)
            fail(stats_.lines, "unterminated quoted field in column " + std::to_string(index + 1));
          q = static_cast<const char*>(hit) - text.data();
          if (q + 1 < text.size() && text[q + 1] == '"') {
            q += 2;
            continue;
          }
          break;
        }
        field = text.substr(start + 1, q - start - 1);
        end = q + 1;
        while (end < text.size() && (text[end] == ' ' || text[end] == '\t')) ++end;
        if (end < text.size() && text[end] != ',')
          fail(stats_.lines,
               "unexpected text after the quoted field in column " + std::to_string(index + 1));
      } else {
        const void* hit = std::memchr(text.data() + pos, ',', text.size() - pos);
        end = hit ? static_cast<size_t>(static_cast<const char*>(hit) - text.data()) : text.size();
        field = trim(text.substr(pos, end - pos));
      }
      if (index < slot_of_column_.size() && slot_of_column_[index] >= 0)
        out[slot_of_column_[index]] = field;
      ++index;
      if (index > last_needed_ || end >= text.size()) return index;
      pos = end + 1;
    }
  }

  void header(std::string_view text) {
    have_header_ = true;
    std::array<int, 5> column_of{-1, -1, -1, -1, -1};
    size_t index = 0, pos = 0;
    for (;;) {
      size_t end = text.find(',', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view name = trim(text.substr(pos, end - pos));
      if (name.size() >= 2 && name.front() == '"' && name.back() == '"')
        name = name.substr(1, name.size() - 2);
      for (size_t f = 0; f < kColumns.size(); ++f) {
        if (name != kColumns[f]) continue;
        if (column_of[f] >= 0)
          fail(stats_.lines, "column \"" + std::string(name) + "\" appears twice in the header");
        column_of[f] = static_cast<int>(index);
      }
      ++index;
      if (end >= text.size()) break;
      pos = end + 1;
    }
    std::string missing;
    for (size_t f = 0; f < kColumns.size(); ++f)
      if (column_of[f] < 0) missing += (missing.empty() ? "" : ", ") + std::string(kColumns[f]);
    if (!missing.empty())
      fail(stats_.lines, "header lacks column(s) " + missing +
                             " (expected t,group,site,location,ok in any order)");
    last_needed_ = 0;
    for (int c : column_of) last_needed_ = std::max(last_needed_, static_cast<size_t>(c));
    slot_of_column_.assign(last_needed_ + 1, -1);
    for (size_t f = 0; f < kColumns.size(); ++f)
      slot_of_column_[column_of[f]] = static_cast<int>(f);
  }

  void row(std::string_view text) {
    std::array<std::string_view, 5> f;
    const size_t seen = split(text, f);
    if (seen <= last_needed_)
      fail(stats_.lines, "expected at least " + std::to_string(last_needed_ + 1) +
                             " columns, got " + std::to_string(seen));
    TimelineRow r;
    r.line = stats_.lines;
    const std::string_view t = f[kT];
    // Whole seconds are the common case and parse exactly as integers; anything else (decimals,
    // exponents) goes through the floating-point parser.
    int64_t whole = 0;
    auto [iend, iec] = std::from_chars(t.data(), t.data() + t.size(), whole);
    const bool integral =
        iec == std::errc() && iend == t.data() + t.size() && !t.empty() && t.size() <= 12;
    if (integral) {
      r.t = static_cast<double>(whole);
    } else {
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), r.t);
      if (ec != std::errc() || end != t.data() + t.size() || t.empty() || !std::isfinite(r.t))
        fail(r.line, "t must be a number of seconds, got " + quoted(t));
    }
    if (r.t < 0 || r.t > kMaxTimelineSeconds)
      fail(r.line, "t must be between 0 and " + std::to_string(int64_t(kMaxTimelineSeconds)) +
                       " seconds (10 years), got " + quoted(t));
    if (stats_.rows > 0 && r.t < last_t_)
      fail(r.line, "t " + std::string(t) + " is before the previous row's t (rows must be in " +
                       "non-decreasing t)");
    r.at = core::Instant(core::Millis(integral ? whole * 1000 : std::llround(r.t * 1000.0)));
    const std::string_view site = f[kSite];
    if (site.size() == 7 && site == "primary")
      r.site = core::Site::primary;
    else if (site.size() == 9 && site == "secondary")
      r.site = core::Site::secondary;
    else
      fail(r.line, "site must be primary or secondary, got " + quoted(site));
    const std::string_view ok = f[kOk];
    if (ok.size() != 1 || (ok[0] != '0' && ok[0] != '1'))
      fail(r.line, "ok must be 0 or 1, got " + quoted(ok));
    r.ok = ok[0] == '1';
    r.group = f[kGroup];
    r.location = f[kLocation];
    if (std::string problem = on_row_(r); !problem.empty()) fail(r.line, problem);
    last_t_ = r.t;
    stats_.last = r.at;
    ++stats_.rows;
  }

  const std::string& name_;
  const RowHandler& on_row_;
  TimelineStats stats_;
  bool have_header_ = false;
  size_t last_needed_ = 0;
  std::vector<int> slot_of_column_;  // column index -> Field, or -1 for an ignored column
  double last_t_ = 0;
};

// Hands every complete line of `data` to the parser; returns the bytes consumed.
size_t lines(Parser& p, const char* data, size_t size) {
  size_t start = 0;
  while (start < size) {
    const void* nl = std::memchr(data + start, '\n', size - start);
    if (!nl) break;
    const size_t end = static_cast<const char*>(nl) - data;
    p.line(std::string_view(data + start, end - start));
    start = end + 1;
  }
  return start;
}

}  // namespace

TimelineStats read_timeline_text(std::string_view text, const std::string& name,
                                 const RowHandler& on_row) {
  Parser p(name, on_row);
  const size_t used = lines(p, text.data(), text.size());
  if (used < text.size()) p.line(text.substr(used));
  return p.finish();
}

TimelineStats read_timeline(const std::string& path, const RowHandler& on_row) {
  Parser p(path, on_row);
  UniqueFd fd(new int(::open(path.c_str(), O_RDONLY | O_CLOEXEC)));
  if (*fd < 0) p.fail(1, std::string("cannot open timeline: ") + std::strerror(errno));
  // Room for one block plus a carried-over partial line of the maximum length (and its CR).
  std::vector<char> buf(kBlock + kMaxTimelineLine + 2);
  size_t have = 0;
  for (;;) {
    const ssize_t n = ::read(*fd, buf.data() + have, buf.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      p.fail(1, std::string("cannot read timeline: ") + std::strerror(errno));
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
    const size_t used = lines(p, buf.data(), have);
    if (have - used > kMaxTimelineLine + 1) p.too_long();
    std::memmove(buf.data(), buf.data() + used, have - used);
    have -= used;
  }
  if (have > 0) p.line(std::string_view(buf.data(), have));
  return p.finish();
}

}  // namespace fo::sim
