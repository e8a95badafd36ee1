// The control protocol of failoverd: one JSON request, one JSON reply, per connection.
// Shared by the server (daemon side) and the client (failoverctl). Documented in
// docs/control-protocol.md; the constants below are a public contract.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

namespace fo::control {

inline constexpr int kProtocolVersion = 1;
inline constexpr const char* kDefaultSocketPath = "/run/failoverd/control.sock";

// Result codes of a reply ("result").
inline constexpr int kResultSuccess = 0;
inline constexpr int kResultError = 1;
inline constexpr int kResultUnsupported = 2;  // unknown command
inline constexpr int kResultDenied = 3;       // the peer may not do this
inline constexpr int kResultRefused = 4;      // the daemon declined (e.g. the state forbids it)
inline constexpr int kResultBadRequest = 5;   // malformed JSON or arguments
inline constexpr int kResultVersionMismatch = 6;

// Limits (the server's defaults; see ServerLimits).
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;
inline constexpr std::size_t kMaxReplyBytes = 16 * 1024 * 1024;  // what the client accepts
inline constexpr std::size_t kMaxConnections = 32;
inline constexpr std::chrono::milliseconds kRequestTimeout{5000};
inline constexpr std::chrono::milliseconds kReplyTimeout{5000};

// Credentials of the connecting process (SO_PEERCRED at accept).
struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// A well-formed request. The handler only ever sees these.
struct Request {
  std::string command;
  nlohmann::json arguments = nlohmann::json::object();  // always an object
  Peer peer;
};

// A complete reply object: {"result", "text", "arguments", "version"}.
nlohmann::json reply(int result, std::string text,
                     nlohmann::json arguments = nlohmann::json::object());

// A complete request object: {"command", "arguments", "version"}.
nlohmann::json make_request(std::string command,
                            nlohmann::json arguments = nlohmann::json::object());

// Parses one request line (without the trailing "\n"). Returns the request, or the reply to
// send back (result 5 or 6) when the line is not a valid request.
std::variant<Request, nlohmann::json> parse_request(std::string_view line, const Peer& peer);

// Makes whatever a handler returned safe to send: an object with an integer "result", a
// "text" string and "version". Anything else becomes an error reply.
nlohmann::json normalize_reply(nlohmann::json handler_reply);

// Serializes a reply or request as one line ending in "\n". Invalid UTF-8 in strings is
// replaced, never thrown.
std::string to_line(const nlohmann::json& message);

// Human name of a result code ("success", "refused", ...), "result N" for unknown codes.
std::string result_name(int result);

}  // namespace fo::control
