// Request parsing and reply construction for the control protocol (docs/control-protocol.md).
#include "daemon/control/protocol.hpp"

#include <utility>

namespace fo::control {

using nlohmann::json;

json reply(int result, std::string text, json arguments) {
  return json{{"result", result},
              {"text", std::move(text)},
              {"arguments", std::move(arguments)},
              {"version", kProtocolVersion}};
}

json make_request(std::string command, json arguments) {
  return json{{"command", std::move(command)},
              {"arguments", std::move(arguments)},
              {"version", kProtocolVersion}};
}

std::variant<Request, json> parse_request(std::string_view line, const Peer& peer) {
  json message = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) return reply(kResultBadRequest, "malformed request: not valid JSON");
  if (!message.is_object()) {
    return reply(kResultBadRequest, "malformed request: not a JSON object");
  }
  // Version first: a newer client may use a shape this server does not understand.
  if (auto it = message.find("version"); it != message.end()) {
    if (!it->is_number_integer()) {
      return reply(kResultBadRequest, "malformed request: \"version\" must be an integer");
    }
    if (it->get<int64_t>() != kProtocolVersion) {
      return reply(kResultVersionMismatch,
                   "protocol version " + it->dump() + " is not supported; this daemon speaks " +
                       std::to_string(kProtocolVersion),
                   json{{"protocol", kProtocolVersion}});
    }
  }
  auto command = message.find("command");
  if (command == message.end()) {
    return reply(kResultBadRequest, "malformed request: \"command\" is missing");
  }
  if (!command->is_string() || command->get_ref<const std::string&>().empty()) {
    return reply(kResultBadRequest, "malformed request: \"command\" must be a non-empty string");
  }
  Request request;
  request.command = command->get<std::string>();
  request.peer = peer;
  if (auto args = message.find("arguments"); args != message.end() && !args->is_null()) {
    if (!args->is_object()) {
      return reply(kResultBadRequest, "malformed request: \"arguments\" must be an object");
    }
    request.arguments = std::move(*args);
  }
  return request;
}

json normalize_reply(json handler_reply) {
  if (!handler_reply.is_object()) {
    return reply(kResultError, "internal error: the command handler returned no reply object");
  }
  auto result = handler_reply.find("result");
  if (result == handler_reply.end() || !result->is_number_integer()) {
    return reply(kResultError, "internal error: the command handler returned no result code");
  }
  if (auto text = handler_reply.find("text"); text == handler_reply.end() || !text->is_string()) {
    handler_reply["text"] = "";
  }
  if (auto args = handler_reply.find("arguments");
      args == handler_reply.end() || !args->is_object()) {
    handler_reply["arguments"] = json::object();
  }
  handler_reply["version"] = kProtocolVersion;
  return handler_reply;
}

std::string to_line(const json& message) {
  std::string line = message.dump(-1, ' ', false, json::error_handler_t::replace);
  line.push_back('\n');
  return line;
}

std::string result_name(int result) {
  switch (result) {
    case kResultSuccess:
      return "success";
    case kResultError:
      return "error";
    case kResultUnsupported:
      return "unsupported command";
    case kResultDenied:
      return "denied";
    case kResultRefused:
      return "refused";
    case kResultBadRequest:
      return "bad request";
    case kResultVersionMismatch:
      return "version mismatch";
    default:
      return "result " + std::to_string(result);
  }
}

}  // namespace fo::control
