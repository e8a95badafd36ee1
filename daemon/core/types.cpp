// Names and durations of the core vocabulary.
#include "types.hpp"

#include <array>
#include <cctype>
#include <utility>

namespace fo::core {
namespace {

template <typename E, size_t N>
std::optional<E> lookup(const std::array<std::pair<E, std::string_view>, N>& table,
                        std::string_view s) {
  for (const auto& [e, name] : table)
    if (name == s) return e;
  return std::nullopt;
}

template <typename E, size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [v, name] : table)
    if (v == e) return name;
  return "?";
}

constexpr std::array<std::pair<State, std::string_view>, 6> kStates{{
    {State::primary_active, "primary_active"},
    {State::primary_degraded, "primary_degraded"},
    {State::failing_over, "failing_over"},
    {State::secondary_active, "secondary_active"},
    {State::failing_back, "failing_back"},
    {State::held, "held"},
}};
constexpr std::array<std::pair<Site, std::string_view>, 2> kSites{{
    {Site::primary, "primary"},
    {Site::secondary, "secondary"},
}};
constexpr std::array<std::pair<Phase, std::string_view>, 4> kPhases{{
    {Phase::warm, "warm"},
    {Phase::failover, "failover"},
    {Phase::failback, "failback"},
    {Phase::cool, "cool"},
}};
constexpr std::array<std::pair<Initiator, std::string_view>, 2> kInitiators{{
    {Initiator::automatic, "auto"},
    {Initiator::operator_, "operator"},
}};

}  // namespace

std::string_view to_string(State s) {
  return name_of(kStates, s);
}
std::string_view to_string(Site s) {
  return name_of(kSites, s);
}
std::string_view to_string(Phase p) {
  return name_of(kPhases, p);
}
std::string_view to_string(Initiator i) {
  return name_of(kInitiators, i);
}
std::string_view to_string(FailbackMode m) {
  return m == FailbackMode::automatic ? "auto" : "manual";
}
std::string_view to_string(Require r) {
  return r == Require::all ? "all" : "any";
}
std::optional<State> state_from_string(std::string_view s) {
  return lookup(kStates, s);
}
std::optional<Site> site_from_string(std::string_view s) {
  return lookup(kSites, s);
}
std::optional<Phase> phase_from_string(std::string_view s) {
  return lookup(kPhases, s);
}
std::optional<Initiator> initiator_from_string(std::string_view s) {
  return lookup(kInitiators, s);
}

std::optional<Millis> parse_duration(std::string_view text) {
  constexpr int64_t kMaxMs = int64_t(366) * 24 * 3600 * 1000;
  if (text.empty()) return std::nullopt;
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    int64_t n = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      n = n * 10 + (text[i] - '0');
      if (n > kMaxMs) return std::nullopt;
      ++i;
    }
    size_t u = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(u, i - u);
    int64_t mul;
    if (unit == "ms")
      mul = 1;
    else if (unit == "s")
      mul = 1000;
    else if (unit == "m")
      mul = 60'000;
    else if (unit == "h")
      mul = 3'600'000;
    else if (unit == "d")
      mul = 86'400'000;
    else
      return std::nullopt;
    total += n * mul;
    if (total > kMaxMs) return std::nullopt;
  }
  return Millis(total);
}

std::string format_duration(Millis d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  const std::pair<int64_t, const char*> units[] = {
      {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1000, "s"}, {1, "ms"}};
  // Sub-second detail only matters for sub-second durations.
  if (ms >= 1000) ms -= ms % 1000;
  for (const auto& [size, name] : units) {
    if (ms >= size) {
      out += std::to_string(ms / size) + name;
      ms %= size;
    }
  }
  return out;
}

}  // namespace fo::core
