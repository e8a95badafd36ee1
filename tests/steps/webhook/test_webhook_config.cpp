// Config keys of the webhook step: defaults, validation with positions, the example file.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "daemon/config/config.hpp"

namespace {

constexpr std::string_view kGroup = R"([[group]]
name = "shop"
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.10/health" } ]
[group.secondary]
probes = [ { kind = "http", url = "https://198.51.100.20/health" } ]
[[group.failover]]
kind = "webhook"
)";

std::string errors_of(const std::string& step_keys) {
  try {
    (void)fo::config::parse_config(std::string(kGroup) + step_keys, "t.toml");
  } catch (const fo::config::ConfigException& e) {
    return e.what();
  }
  return "OK";
}

const fo::config::Step& only_step(const fo::config::Config& c) {
  return c.groups.at(0).steps_for(fo::core::Phase::failover).at(0);
}

}  // namespace

TEST_CASE("webhook config defaults and keys", "[webhook][config]") {
  auto c = fo::config::parse_config(std::string(kGroup) + "url = \"http://127.0.0.1:8080/h\"\n",
                                    "t.toml");
  const auto& w = only_step(c).webhook;
  CHECK(w.url == "http://127.0.0.1:8080/h");
  CHECK(w.headers.empty());
  CHECK(w.token_file.empty());
  CHECK(w.tls_verify);
  CHECK(w.ca_file.empty());
  CHECK(w.max_response == 65536);

  c = fo::config::parse_config(std::string(kGroup) + R"(url = "https://h.example/x"
headers = { "X-Team" = "ops" }
token_file = "/etc/failoverd/hook.token"
tls_verify = false
ca_file = "/etc/ssl/ca.pem"
max_response = "4kB"
)",
                               "t.toml");
  const auto& v = only_step(c).webhook;
  CHECK(v.headers.at("X-Team") == "ops");
  CHECK(v.token_file == "/etc/failoverd/hook.token");
  CHECK_FALSE(v.tls_verify);
  CHECK(v.ca_file == "/etc/ssl/ca.pem");
  CHECK(v.max_response == 4096);
  c = fo::config::parse_config(std::string(kGroup) + "url = \"https://h/x\"\nmax_response = 100\n",
                               "t.toml");
  CHECK(only_step(c).webhook.max_response == 100);
}

TEST_CASE("webhook config errors name the position", "[webhook][config]") {
  CHECK(errors_of("") == "t.toml:7:1: missing required key 'url' in [[group.failover]]");
  CHECK(errors_of("url = \"ftp://h/x\"\n") ==
        "t.toml:9:7: group.failover.url: 'ftp://h/x' must start with http:// or https://");
  CHECK(errors_of("url = \"https://h/x\"\nheaders = { \"Content-Type\" = \"text/plain\" }\n")
            .find("t.toml:10:11: group.failover.headers: 'Content-Type' is set by failoverd") !=
        std::string::npos);
  CHECK(errors_of("url = \"https://h/x\"\ntoken_file = \"/t\"\nheaders = { Authorization = "
                  "\"Bearer x\" }\n")
            .find("conflicts with token_file") != std::string::npos);
  CHECK(errors_of("url = \"https://h/x\"\ntoken_file = \"token\"\n")
            .find("t.toml:10:14: group.failover.token_file: 'token' must be an absolute path") !=
        std::string::npos);
  CHECK(errors_of("url = \"http://h/x\"\nca_file = \"/ca.pem\"\n")
            .find("group.failover.ca_file: needs an https:// url") != std::string::npos);
  CHECK(errors_of("url = \"https://h/x\"\nmax_response = \"2GB\"\n")
            .find("is not a size from 1B to 1MB") != std::string::npos);
  CHECK(errors_of("url = \"https://h/x\"\nmax_response = 0\n").find("max_response") !=
        std::string::npos);
  CHECK(errors_of("url = \"https://h/x\"\nmax_respons = 1\n").find("max_response") !=
        std::string::npos);
}

TEST_CASE("example etc/examples/steps-webhook.toml loads", "[webhook][config]") {
  std::ifstream in(FO_WEBHOOK_EXAMPLE);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const auto c = fo::config::parse_config(text.str(), "steps-webhook.toml");
  const auto& step = c.groups.at(0).steps_for(fo::core::Phase::failover).at(0);
  CHECK(step.kind == "webhook");
  CHECK(step.webhook.token_file == "/etc/failoverd/webhook.token");
  CHECK_FALSE(step.abort_on_failure);
  CHECK(c.groups.at(0).steps_for(fo::core::Phase::failback).at(0).webhook.max_response == 16384);
}
