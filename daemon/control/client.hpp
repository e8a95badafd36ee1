// Blocking client of the control protocol, used by failoverctl and tests: one request, one
// reply, bounded in time (poll with a deadline) and size (kMaxReplyBytes).
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace fo::control {

// Any failure to get a well-formed reply. The message is meant for the operator.
class ControlError : public std::runtime_error {
 public:
  enum class Kind { connect, timeout, io, malformed };
  ControlError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// Sends `request` (one JSON object) to the daemon at `path` and returns its reply, an object
// with an integer "result". Throws ControlError when the daemon cannot be reached, does not
// answer within `timeout`, or answers something that is not a reply.
nlohmann::json call(const std::string& path, const nlohmann::json& request,
                    std::chrono::milliseconds timeout);

}  // namespace fo::control
