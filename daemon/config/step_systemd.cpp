// Config loader: the keys of a `systemd` step (see docs/steps/systemd.md).
#include <algorithm>
#include <array>

#include "daemon/config/config_parts.hpp"

namespace fo::config::detail {
namespace {

constexpr std::size_t kMaxUnitName = 255;  // systemd's UNIT_NAME_MAX without the NUL
constexpr std::size_t kMaxBusAddress = 1024;

constexpr std::array<std::string_view, 11> kUnitTypes = {"service", "socket",    "target", "device",
                                                         "mount",   "automount", "swap",   "timer",
                                                         "path",    "slice",     "scope"};

bool unit_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view(":-_.\\").find(c) != std::string_view::npos;
}

// Mirrors systemd's unit_name_is_valid() for plain units and template instances; a bare
// template ("x@.service") cannot be started, so it is refused too.
std::string unit_name_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > kMaxUnitName) return "is longer than 255 characters";
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0)
    return "is not a unit name (expected e.g. \"nginx.service\")";
  const std::string_view suffix = name.substr(dot + 1);
  if (std::find(kUnitTypes.begin(), kUnitTypes.end(), suffix) == kUnitTypes.end())
    return "has an unknown unit type \"." + std::string(suffix) +
           "\" (expected .service, .socket, .target, .mount, .timer, ...)";
  const std::string_view prefix = name.substr(0, dot);
  const auto at = prefix.find('@');
  if (at != std::string_view::npos) {
    if (at == 0) return "has an empty name before '@'";
    if (prefix.find('@', at + 1) != std::string_view::npos) return "has more than one '@'";
    if (at + 1 == prefix.size())
      return "is a template without an instance (expected e.g. \"getty@tty1.service\")";
  }
  for (char c : prefix)
    if (c != '@' && !unit_char(c))
      return "contains a character not allowed in unit names (allowed: A-Z a-z 0-9 : - _ . \\ "
             "@)";
  return "";
}

std::string bus_address_problem(std::string_view address) {
  if (address.substr(0, 10) != "unix:path=" && address.substr(0, 14) != "unix:abstract=")
    return "must be a local D-Bus address starting with \"unix:path=\" or \"unix:abstract=\"";
  for (char c : address)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "contains control characters";
  if (address.find(';') != std::string_view::npos) return "must name a single address (no ';')";
  return "";
}

}  // namespace

std::vector<std::string_view> systemd_step_keys() {
  return {"unit", "action", "bus_address", "mode"};
}

void parse_systemd_step(const TableReader& r, SystemdStep& out) {
  if (auto v = r.string("unit", kMaxUnitName + 64)) {
    if (std::string problem = unit_name_problem(*v); !problem.empty())
      r.error_at_value("unit", r.path("unit") + ": " + quote(*v) + " " + problem);
    else
      out.unit = *v;
  } else if (!r.has("unit")) {
    r.missing("unit");
  }
  if (auto v = r.choice("action", {"start", "stop", "restart"})) {
    out.action = *v;
  } else if (!r.has("action")) {
    r.missing("action");
  }
  if (auto v = r.string("bus_address", kMaxBusAddress)) {
    if (std::string problem = bus_address_problem(*v); !problem.empty())
      r.error_at_value("bus_address", r.path("bus_address") + ": " + quote(*v) + " " + problem);
    else
      out.bus_address = *v;
  }
  // "isolate" would stop every unit not wanted by the target and "flush" is deprecated: neither
  // belongs in a failover plan.
  if (auto v = r.choice("mode", {"replace", "fail", "replace-irreversibly", "ignore-dependencies",
                                 "ignore-requirements"}))
    out.mode = *v;
}

}  // namespace fo::config::detail
