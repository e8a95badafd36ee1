// Time arguments and the confirmation prompt of failoverctl (see input.hpp).
#include "ctl/input.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <istream>
#include <ostream>
#include <string>

#include "daemon/core/types.hpp"

namespace fo::ctl {

namespace {

constexpr std::size_t kMaxAnswerBytes = 256;

// Reads exactly `width` digits at `pos`.
std::optional<int> digits(std::string_view s, std::size_t pos, std::size_t width) {
  if (pos + width > s.size()) return std::nullopt;
  int value = 0;
  for (std::size_t i = pos; i < pos + width; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
    value = value * 10 + (s[i] - '0');
  }
  return value;
}

std::optional<int64_t> parse_iso8601(std::string_view s) {
  using namespace std::chrono;
  auto y = digits(s, 0, 4), mo = digits(s, 5, 2), d = digits(s, 8, 2);
  if (!y || !mo || !d || s[4] != '-' || s[7] != '-') return std::nullopt;
  const year_month_day date{year(*y), month(unsigned(*mo)), day(unsigned(*d))};
  if (!date.ok()) return std::nullopt;
  int64_t ms = duration_cast<milliseconds>(sys_days(date).time_since_epoch()).count();
  if (s.size() == 10) return ms;

  if (s.size() < 20 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ')) return std::nullopt;
  auto h = digits(s, 11, 2), mi = digits(s, 14, 2), sec = digits(s, 17, 2);
  if (!h || !mi || !sec || s[13] != ':' || s[16] != ':') return std::nullopt;
  if (*h > 23 || *mi > 59 || *sec > 60) return std::nullopt;
  ms += ((int64_t(*h) * 60 + *mi) * 60 + *sec) * 1000;
  std::size_t pos = 19;
  if (s[pos] == '.') {
    ++pos;
    int64_t fraction = 0, scale = 100;
    const std::size_t first = pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      fraction += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == first || pos - first > 9) return std::nullopt;
    ms += fraction;
  }
  const std::string_view zone = s.substr(pos);
  if (zone == "Z" || zone == "z" || zone == "+00:00") return ms;
  return std::nullopt;  // only UTC: local offsets are a classic source of off-by-hours
}

}  // namespace

std::optional<int64_t> parse_time(std::string_view text, int64_t now_ms) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  if (text.front() == '-') {
    auto ago = core::parse_duration(text.substr(1));
    if (!ago) return std::nullopt;
    return now_ms - ago->count();
  }
  if (std::all_of(text.begin(), text.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    if (text.size() > 15) return std::nullopt;  // beyond year 33658: a typo
    int64_t ms = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return ms;
  }
  return parse_iso8601(text);
}

Confirmation confirm(std::istream& in, std::ostream& out, bool stdin_is_tty, bool assume_yes) {
  if (assume_yes) return Confirmation::confirmed;
  if (!stdin_is_tty) return Confirmation::no_terminal;
  out << "Proceed? [y/N] " << std::flush;
  std::string answer;
  char c = 0;
  while (in.get(c) && c != '\n') {
    if (answer.size() < kMaxAnswerBytes) answer.push_back(c);
  }
  auto not_space = [](char ch) { return !std::isspace(static_cast<unsigned char>(ch)); };
  answer.erase(answer.begin(), std::find_if(answer.begin(), answer.end(), not_space));
  answer.erase(std::find_if(answer.rbegin(), answer.rend(), not_space).base(), answer.end());
  std::transform(answer.begin(), answer.end(), answer.begin(),
                 [](unsigned char ch) { return char(std::tolower(ch)); });
  return answer == "y" || answer == "yes" ? Confirmation::confirmed : Confirmation::declined;
}

}  // namespace fo::ctl
