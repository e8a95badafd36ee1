// Config keys of the systemd step: defaults, unit name and bus address validation, the example.
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
kind = "systemd"
)";

std::string errors_of(const std::string& step_keys) {
  try {
    (void)fo::config::parse_config(std::string(kGroup) + step_keys, "t.toml");
  } catch (const fo::config::ConfigException& e) {
    return e.what();
  }
  return "OK";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("systemd config defaults and keys", "[systemd][config]") {
  auto c = fo::config::parse_config(
      std::string(kGroup) + "unit = \"nginx.service\"\naction = \"restart\"\n", "t.toml");
  const auto& s = c.groups.at(0).steps_for(fo::core::Phase::failover).at(0).systemd;
  CHECK(s.unit == "nginx.service");
  CHECK(s.action == "restart");
  CHECK(s.bus_address.empty());
  CHECK(s.mode == "replace");

  c = fo::config::parse_config(std::string(kGroup) + R"(unit = "getty@tty1.service"
action = "stop"
bus_address = "unix:path=/run/x/bus"
mode = "fail"
)",
                               "t.toml");
  const auto& t = c.groups.at(0).steps_for(fo::core::Phase::failover).at(0).systemd;
  CHECK(t.unit == "getty@tty1.service");
  CHECK(t.bus_address == "unix:path=/run/x/bus");
  CHECK(t.mode == "fail");
}

TEST_CASE("systemd config errors name the position", "[systemd][config]") {
  CHECK(has(errors_of("action = \"start\"\n"),
            "t.toml:7:1: missing required key 'unit' in [[group.failover]]"));
  CHECK(has(errors_of("unit = \"a.service\"\n"), "missing required key 'action'"));
  CHECK(has(errors_of("unit = \"nginx\"\naction = \"start\"\n"),
            "t.toml:9:8: group.failover.unit: 'nginx' is not a unit name"));
  CHECK(has(errors_of("unit = \"nginx.srvice\"\naction = \"start\"\n"),
            "has an unknown unit type \".srvice\""));
  CHECK(has(errors_of("unit = \"getty@.service\"\naction = \"start\"\n"),
            "is a template without an instance"));
  CHECK(has(errors_of("unit = \"a b.service\"\naction = \"start\"\n"),
            "contains a character not allowed"));
  CHECK(has(errors_of("unit = \"" + std::string(300, 'a') + ".service\"\naction = \"start\"\n"),
            "longer than 255"));
  CHECK(has(errors_of("unit = \"a.service\"\naction = \"reload\"\n"),
            "t.toml:10:10: group.failover.action: invalid value 'reload'"));
  CHECK(has(errors_of("unit = \"a.service\"\naction = \"start\"\nmode = \"isolate\"\n"),
            "group.failover.mode: invalid value 'isolate'"));
  CHECK(has(errors_of("unit = \"a.service\"\naction = \"start\"\nbus_address = "
                      "\"tcp:host=127.0.0.1,port=1\"\n"),
            "must be a local D-Bus address"));
  CHECK(has(errors_of("unit = \"a.service\"\naction = \"start\"\nbus_adress = \"x\"\n"),
            "bus_address"));
}

TEST_CASE("example etc/examples/steps-systemd.toml loads", "[systemd][config]") {
  std::ifstream in(FO_SYSTEMD_EXAMPLE);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const auto c = fo::config::parse_config(text.str(), "steps-systemd.toml");
  const auto& failover = c.groups.at(0).steps_for(fo::core::Phase::failover);
  REQUIRE(failover.size() == 2);
  CHECK(failover[0].systemd.unit == "shop.service");
  CHECK(failover[1].systemd.mode == "fail");
  CHECK(c.groups.at(0).steps_for(fo::core::Phase::failback).at(0).systemd.action == "stop");
}
