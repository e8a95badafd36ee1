// Structured journald events (stable MESSAGE_ID plus fields such as GROUP=, FROM=, TO=) and the
// process-wide spdlog setup. Journal writes are best effort: without journald they are dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fo::platform {

struct JournalField {
  std::string name;  // journald rules: [A-Z0-9_], not starting with '_' or a digit, <= 64 chars
  std::string value;
};

// Sends MESSAGE_ID= (32 hex chars), PRIORITY= (0..7, clamped), MESSAGE=,
// SYSLOG_IDENTIFIER=failoverd and `fields` via sd_journal_sendv. Invalid field names, names we
// set ourselves and fields past the limits are left out rather than losing the whole entry;
// a malformed message_id is left out too. Errors are ignored. Does not log to stderr.
void journal_event(std::string_view message_id, int priority, std::string_view message,
                   const std::vector<JournalField>& fields);

// The "KEY=VALUE" strings journal_event sends (exposed for tests).
std::vector<std::string> journal_entry(std::string_view message_id, int priority,
                                       std::string_view message,
                                       const std::vector<JournalField>& fields);

bool valid_journal_field_name(std::string_view name);

// Default spdlog logger "failoverd" writing to stderr. Under systemd (JOURNAL_STREAM matches
// stderr) lines carry a "<N>" syslog prefix so journald keeps the level and adds its own
// timestamps; otherwise lines get a timestamp and level letter.
// level: trace|debug|info|warn|error|critical|off; throws std::invalid_argument otherwise.
void setup_logging(std::string_view level);

}  // namespace fo::platform
