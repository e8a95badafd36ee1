// Pure protocol functions: request validation and reply normalization.
#include <catch2/catch.hpp>

#include "daemon/control/protocol.hpp"

using namespace fo::control;
using nlohmann::json;

namespace {

int bad_result(std::string_view line) {
  auto parsed = parse_request(line, Peer{});
  if (std::holds_alternative<Request>(parsed)) return kResultSuccess;
  return std::get<json>(parsed)["result"].get<int>();
}

}  // namespace

TEST_CASE("parse_request accepts well-formed requests", "[protocol]") {
  auto parsed = parse_request(R"({"command":"history","arguments":{"limit":3},"version":1})",
                              Peer{42, 1000, 100});
  REQUIRE(std::holds_alternative<Request>(parsed));
  const Request& r = std::get<Request>(parsed);
  CHECK(r.command == "history");
  CHECK(r.arguments == json{{"limit", 3}});
  CHECK(r.peer.pid == 42);
  CHECK(r.peer.uid == 1000u);

  auto minimal = parse_request(R"({"command":"status"})", Peer{});
  REQUIRE(std::holds_alternative<Request>(minimal));
  CHECK(std::get<Request>(minimal).arguments == json::object());
  CHECK(bad_result(R"({"command":"status","arguments":null})") == kResultSuccess);
}

TEST_CASE("parse_request rejects malformed requests with 5 and other versions with 6",
          "[protocol]") {
  CHECK(bad_result("") == kResultBadRequest);
  CHECK(bad_result("{") == kResultBadRequest);
  CHECK(bad_result("\"status\"") == kResultBadRequest);
  CHECK(bad_result(R"({"arguments":{}})") == kResultBadRequest);
  CHECK(bad_result(R"({"command":null})") == kResultBadRequest);
  CHECK(bad_result(R"({"command":"x","arguments":"y"})") == kResultBadRequest);
  CHECK(bad_result(R"({"command":"x","version":"1"})") == kResultBadRequest);
  CHECK(bad_result(R"({"command":"x","version":2})") == kResultVersionMismatch);
  CHECK(bad_result(R"({"command":"x","version":0})") == kResultVersionMismatch);
  CHECK(bad_result("{\"command\":\"\xff\"}") == kResultBadRequest);  // invalid UTF-8
}

TEST_CASE("replies are complete and always serializable", "[protocol]") {
  json r = reply(kResultRefused, "held");
  CHECK(r == json{{"result", 4}, {"text", "held"}, {"arguments", json::object()}, {"version", 1}});

  CHECK(normalize_reply(json{{"result", 0}}) ==
        json{{"result", 0}, {"text", ""}, {"arguments", json::object()}, {"version", 1}});
  CHECK(normalize_reply(json::array())["result"] == kResultError);
  CHECK(normalize_reply(json{{"result", "0"}})["result"] == kResultError);

  const std::string line = to_line(reply(0, std::string("bad \xff utf8")));
  CHECK(line.back() == '\n');
  CHECK_FALSE(json::parse(line, nullptr, false).is_discarded());

  CHECK(make_request("status") ==
        json{{"command", "status"}, {"arguments", json::object()}, {"version", 1}});
  CHECK(result_name(kResultDenied) == "denied");
  CHECK(result_name(99) == "result 99");
}
