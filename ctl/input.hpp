// failoverctl's operator input: time arguments (--since/--until) and the confirmation prompt.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string_view>

namespace fo::ctl {

// Accepts milliseconds since the epoch ("1796032800000"), ISO-8601 UTC
// ("2026-11-30T10:00:00Z", optional ".123" fraction, "+00:00" for Z, or a bare date
// "2026-11-30"), or a time relative to now_ms ("-2h", "-1h30m", "-90s"). nullopt otherwise.
std::optional<int64_t> parse_time(std::string_view text, int64_t now_ms);

enum class Confirmation { confirmed, declined, no_terminal };

// --yes confirms without asking. Otherwise asks "Proceed? [y/N] " on `out` and reads one line
// from `in`; only "y"/"yes" (any case) confirm. Without a terminal on stdin nothing is read:
// a script must say --yes explicitly.
Confirmation confirm(std::istream& in, std::ostream& out, bool stdin_is_tty, bool assume_yes);

}  // namespace fo::ctl
