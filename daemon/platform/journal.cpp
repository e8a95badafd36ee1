// Structured journald events and spdlog setup (see journal.hpp).
#define SD_JOURNAL_SUPPRESS_LOCATION  // CODE_FILE= would always name this file, not the caller
#include "daemon/platform/journal.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace fo::platform {
namespace {

constexpr std::size_t kMaxFields = 64;
constexpr std::size_t kMaxValue = 16 * 1024;
constexpr std::size_t kMaxMessage = 16 * 1024;
constexpr std::size_t kMaxFieldName = 64;
constexpr std::array<std::string_view, 4> kOwnFields = {"MESSAGE_ID", "PRIORITY", "MESSAGE",
                                                        "SYSLOG_IDENTIFIER"};

bool valid_message_id(std::string_view id) {
  return id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

// journald derives the level from a "<N>" prefix on each stderr line (SyslogLevelPrefix=).
class SyslogPrefix : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    char digit = '6';
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        digit = '7';
        break;
      case spdlog::level::info:
        digit = '6';
        break;
      case spdlog::level::warn:
        digit = '4';
        break;
      case spdlog::level::err:
        digit = '3';
        break;
      default:
        digit = '2';
        break;
    }
    const char prefix[3] = {'<', digit, '>'};
    dest.append(prefix, prefix + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SyslogPrefix>();
  }
};

// systemd sets JOURNAL_STREAM=<dev>:<inode> of the stream it connected; only trust it if it is
// still our stderr (a child of the service may have had stderr redirected).
bool stderr_is_journal() {
  const char* env = std::getenv("JOURNAL_STREAM");
  if (!env) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(env, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return st.st_dev == dev && st.st_ino == ino;
}

spdlog::level::level_enum parse_level(std::string_view level) {
  if (level == "trace") return spdlog::level::trace;
  if (level == "debug") return spdlog::level::debug;
  if (level == "info") return spdlog::level::info;
  if (level == "warn" || level == "warning") return spdlog::level::warn;
  if (level == "error") return spdlog::level::err;
  if (level == "critical") return spdlog::level::critical;
  if (level == "off") return spdlog::level::off;
  throw std::invalid_argument("unknown log level \"" + std::string(level) + "\"");
}

}  // namespace

bool valid_journal_field_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxFieldName) return false;
  if (name[0] == '_' || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::vector<std::string> journal_entry(std::string_view message_id, int priority,
                                       std::string_view message,
                                       const std::vector<JournalField>& fields) {
  std::vector<std::string> entry;
  entry.reserve(4 + std::min(fields.size(), kMaxFields));
  if (valid_message_id(message_id)) entry.push_back("MESSAGE_ID=" + std::string(message_id));
  entry.push_back("PRIORITY=" + std::to_string(std::clamp(priority, 0, 7)));
  entry.push_back("MESSAGE=" + std::string(message.substr(0, kMaxMessage)));
  entry.push_back("SYSLOG_IDENTIFIER=failoverd");
  std::size_t taken = 0;
  for (const auto& f : fields) {
    if (taken == kMaxFields) break;
    if (!valid_journal_field_name(f.name)) continue;
    if (std::find(kOwnFields.begin(), kOwnFields.end(), f.name) != kOwnFields.end()) continue;
    entry.push_back(f.name + "=" + f.value.substr(0, kMaxValue));
    ++taken;
  }
  return entry;
}

void journal_event(std::string_view message_id, int priority, std::string_view message,
                   const std::vector<JournalField>& fields) {
  const auto entry = journal_entry(message_id, priority, message, fields);
  std::vector<iovec> iov;
  iov.reserve(entry.size());
  for (const auto& e : entry) iov.push_back({const_cast<char*>(e.data()), e.size()});
  // 0 also when no journald exists (ENOENT); -ECONNREFUSED for a stale socket. Either way the
  // daemon goes on: the event also reaches the history store and the logs.
  const int rc = sd_journal_sendv(iov.data(), static_cast<int>(iov.size()));
  if (rc < 0) spdlog::debug("sd_journal_sendv failed: {}", rc);
}

void setup_logging(std::string_view level) {
  const auto lvl = parse_level(level);
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("failoverd", std::move(sink));
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (stderr_is_journal())
    formatter->add_flag<SyslogPrefix>('*').set_pattern("%*%v");
  else
    formatter->set_pattern("%Y-%m-%d %H:%M:%S.%e %L %v");
  logger->set_formatter(std::move(formatter));
  logger->set_level(lvl);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace fo::platform
