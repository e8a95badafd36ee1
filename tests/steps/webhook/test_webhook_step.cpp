// The webhook step against a real HTTP server on loopback, driven on a real sd-event loop.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <optional>

#include "actions/webhook/webhook_step.hpp"
#include "daemon/platform/event.hpp"
#include "tests/integration/harness.hpp"
#include "tests/platform/loop_util.hpp"
#include "tests/steps/webhook/webhook_server.hpp"

using namespace std::chrono_literals;
using fo::actions::StepAttempt;
using fo::actions::StepContext;
using fo::actions::StepOutcome;
using fo::actions::StepPlugin;

namespace {

constexpr const char* kToken = "s3cr3t-t0ken-XYZ";

fo::config::Step webhook_step(const std::string& url, std::chrono::milliseconds timeout = 5s) {
  fo::config::Step s;
  s.kind = "webhook";
  s.name = "notify";
  s.timeout = timeout;
  s.webhook.url = url;
  return s;
}

StepContext context() {
  StepContext c;
  c.group = "shop";
  c.phase = fo::core::Phase::failover;
  c.target = fo::core::Site::secondary;
  c.from = fo::core::Site::primary;
  c.plan_id = 42;
  c.term = 7;
  c.step_index = 2;
  c.idempotency_key = "shop/42/2";
  c.reason = "failing over: primary 1/6 for 3 rounds, secondary 6/6";
  c.initiator = "auto";
  return c;
}

struct Rig {
  fo::platform::EventPtr loop = fo::platform::make_event();
  std::unique_ptr<StepPlugin> plugin = fo::actions::make_webhook_step_plugin(loop.get());
  fo::test::TempDir dir;

  std::string token_file(int mode) {
    const std::string path = dir / "token";
    fo::test::write_file(path, std::string(kToken) + "\n", mode);
    return path;
  }

  // Runs one attempt to completion (bounded) and returns its outcome.
  StepOutcome run(bool apply, const fo::config::Step& step, const StepContext& ctx = context()) {
    std::optional<StepOutcome> got;
    int calls = 0;
    auto done = [&](StepOutcome o) {
      ++calls;
      got = std::move(o);
    };
    std::unique_ptr<StepAttempt> attempt =
        apply ? plugin->apply(step, ctx, done) : plugin->check(step, ctx, done);
    REQUIRE(attempt);
    REQUIRE_FALSE(got);  // never inside apply()/check()
    REQUIRE(fo::test::run_until(
        loop.get(), [&] { return got.has_value(); }, 15s));
    attempt.reset();
    CHECK(calls == 1);
    return *got;
  }
};

bool mentions_token(const StepOutcome& o) {
  return o.detail.find(kToken) != std::string::npos || o.output.find(kToken) != std::string::npos;
}

}  // namespace

TEST_CASE("webhook posts the transition as JSON with its headers", "[webhook]") {
  Rig rig;
  fo::test::WebhookServer server;
  fo::config::Step step = webhook_step(server.url("/hooks/failover"));
  step.webhook.token_file = rig.token_file(0600);
  step.webhook.headers = {{"X-Team", "ops"}};

  StepOutcome o = rig.run(true, step);
  INFO(o.detail);
  REQUIRE(o.ok());
  CHECK(o.retryable);
  CHECK_FALSE(o.already_done);
  CHECK(o.detail.rfind("delivered: HTTP 204 in ", 0) == 0);
  CHECK(o.detail.size() > std::string("delivered: HTTP 204 in  ms").size());
  CHECK_FALSE(mentions_token(o));

  const auto seen = server.requests();
  REQUIRE(seen.size() == 1);
  const auto& req = seen[0];
  CHECK(req.method == "POST");
  CHECK(req.path == "/hooks/failover");
  CHECK(req.headers.at("content-type") == "application/json");
  CHECK(req.headers.at("idempotency-key") == "shop/42/2");
  CHECK(req.headers.at("authorization") == std::string("Bearer ") + kToken);
  CHECK(req.headers.at("x-team") == "ops");
  CHECK(req.headers.count("expect") == 0);

  const auto body = nlohmann::json::parse(req.body);
  CHECK(body.size() == 10);
  CHECK(body.at("group") == "shop");
  CHECK(body.at("phase") == "failover");
  CHECK(body.at("from") == "primary");
  CHECK(body.at("to") == "secondary");
  CHECK(body.at("reason") == "failing over: primary 1/6 for 3 rounds, secondary 6/6");
  CHECK(body.at("initiator") == "auto");
  CHECK(body.at("plan_id") == 42);
  CHECK(body.at("term") == 7);
  CHECK(body.at("idempotency_key") == "shop/42/2");
  const std::string ts = body.at("ts");
  REQUIRE(ts.size() == 24);
  CHECK(ts[4] == '-');
  CHECK(ts[10] == 'T');
  CHECK(ts.back() == 'Z');
  CHECK(ts.substr(0, 2) == "20");
}

TEST_CASE("webhook without a token sends no Authorization header", "[webhook]") {
  Rig rig;
  fo::test::WebhookServer server;
  server.reply({200, "ok", 0ms, false});
  StepOutcome o = rig.run(true, webhook_step(server.url("/h")));
  REQUIRE(o.ok());
  CHECK(o.detail.rfind("delivered: HTTP 200 in ", 0) == 0);
  CHECK(o.output == "ok");
  REQUIRE(server.requests().size() == 1);
  CHECK(server.requests()[0].headers.count("authorization") == 0);
}

TEST_CASE("webhook status codes decide whether a retry can help", "[webhook]") {
  Rig rig;
  fo::test::WebhookServer server;
  const fo::config::Step step = webhook_step(server.url("/h"));

  server.reply({500, "database on fire", 0ms, false});
  StepOutcome o = rig.run(true, step);
  CHECK_FALSE(o.ok());
  CHECK(o.status == StepOutcome::Status::failed);
  CHECK(o.retryable);
  CHECK(o.detail.rfind("HTTP 500 from 127.0.0.1:", 0) == 0);
  CHECK(o.output == "database on fire");

  server.reply({401, "who are you", 0ms, false});
  o = rig.run(true, step);
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);
  CHECK(o.detail.rfind("HTTP 401 from 127.0.0.1:", 0) == 0);

  server.reply({429, "slow down", 0ms, false});
  o = rig.run(true, step);
  CHECK_FALSE(o.ok());
  CHECK(o.retryable);
  CHECK(o.detail.rfind("HTTP 429", 0) == 0);

  server.reply({404, "", 0ms, false});
  o = rig.run(true, step);
  CHECK_FALSE(o.retryable);

  server.reply({301, "", 0ms, false});
  o = rig.run(true, step);
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);
  CHECK(o.detail.find("redirects are not followed") != std::string::npos);
  CHECK(server.requests().size() == 5);
}

TEST_CASE("webhook token and URL path never appear in outcome texts", "[webhook]") {
  Rig rig;
  fo::test::WebhookServer server;
  fo::config::Step step = webhook_step(server.url("/services/T000/B000/secretpath"));
  step.webhook.token_file = rig.token_file(0600);

  // A receiver that echoes what it got: the reply must still not carry the token out.
  server.reply({401, "", 0ms, true});
  StepOutcome o = rig.run(true, step);
  INFO(o.detail << " | " << o.output);
  REQUIRE_FALSE(o.ok());
  REQUIRE(server.requests().size() == 1);
  CHECK(server.requests()[0].headers.at("authorization").find(kToken) != std::string::npos);
  CHECK_FALSE(mentions_token(o));
  CHECK(o.output.find("[token]") != std::string::npos);
  CHECK(o.detail.find("secretpath") == std::string::npos);

  server.reply({200, "posted to /services/T000/B000/secretpath", 0ms, false});
  o = rig.run(true, step);
  REQUIRE(o.ok());
  CHECK(o.output.find("secretpath") == std::string::npos);
  CHECK(o.output == "posted to /[path]");
}

TEST_CASE("webhook refuses a token file readable by others", "[webhook]") {
  Rig rig;
  fo::test::WebhookServer server;
  fo::config::Step step = webhook_step(server.url("/h"));
  step.webhook.token_file = rig.token_file(0644);

  StepOutcome o = rig.run(true, step);
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);
  CHECK(o.detail.find("accessible by others (mode 0644)") != std::string::npos);
  CHECK_FALSE(mentions_token(o));
  CHECK(server.requests().empty());

  o = rig.run(false, step);
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);
  CHECK(o.detail.find("mode 0644") != std::string::npos);
}

TEST_CASE("webhook check reads the token file and sends nothing", "[webhook]") {
  Rig rig;
  fo::test::WebhookServer server;
  fo::config::Step step = webhook_step(server.url("/h"));

  // Nothing to check without a token file.
  CHECK(rig.plugin->check(step, context(), [](StepOutcome) {}) == nullptr);
  CHECK(rig.plugin->observe(step, context(), [](StepOutcome) {}) == nullptr);

  step.webhook.token_file = rig.token_file(0600);
  StepOutcome o = rig.run(false, step);
  CHECK(o.ok());
  CHECK(o.detail.find("is readable") != std::string::npos);
  CHECK_FALSE(mentions_token(o));

  step.webhook.token_file = rig.dir / "missing";
  o = rig.run(false, step);
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);
  CHECK(o.detail.find("No such file") != std::string::npos);
  CHECK(server.requests().empty());
}

TEST_CASE("webhook slow server times out within the step timeout", "[webhook]") {
  Rig rig;
  fo::test::WebhookServer server;
  server.reply({204, "", 5000ms, false});
  const auto t0 = std::chrono::steady_clock::now();
  StepOutcome o = rig.run(true, webhook_step(server.url("/h"), 300ms));
  const double ms = fo::test::ms_since(t0);
  CHECK(o.status == StepOutcome::Status::timed_out);
  CHECK(o.retryable);
  CHECK(o.detail.find("within 300 ms") != std::string::npos);
  CHECK(ms >= 250);
  CHECK(ms < 1500);
}

TEST_CASE("webhook refused connection is a retryable transport error", "[webhook]") {
  Rig rig;
  std::string url;
  {
    fo::test::WebhookServer gone;
    url = gone.url("/h");
  }  // the port is closed again
  StepOutcome o = rig.run(true, webhook_step(url));
  CHECK_FALSE(o.ok());
  CHECK(o.status == StepOutcome::Status::failed);
  CHECK(o.retryable);
  CHECK(o.detail.rfind("cannot deliver to 127.0.0.1:", 0) == 0);
}

TEST_CASE("webhook response body is bounded by max_response", "[webhook]") {
  Rig rig;
  fo::test::WebhookServer server;
  server.reply({200, std::string(5000, 'x'), 0ms, false});
  fo::config::Step step = webhook_step(server.url("/h"));
  step.webhook.max_response = 100;
  StepOutcome o = rig.run(true, step);
  INFO(o.detail);
  CHECK(o.ok());
  CHECK(o.detail.find("response cut at 100 bytes") != std::string::npos);
  CHECK(o.output.size() <= 103);

  server.reply({503, std::string(5000, 'y'), 0ms, false});
  o = rig.run(true, step);
  CHECK_FALSE(o.ok());
  CHECK(o.retryable);
  CHECK(o.detail.rfind("HTTP 503", 0) == 0);
}

TEST_CASE("webhook attempt destroyed before the answer calls nothing", "[webhook]") {
  Rig rig;
  fo::test::WebhookServer server;
  server.reply({204, "", 2000ms, false});
  bool called = false;
  auto attempt = rig.plugin->apply(webhook_step(server.url("/h")), context(),
                                   [&](StepOutcome) { called = true; });
  REQUIRE(fo::test::run_until(
      rig.loop.get(), [&] { return !server.requests().empty(); }, 5s));
  attempt.reset();
  fo::test::run_until(
      rig.loop.get(), [] { return false; }, 300ms);
  CHECK_FALSE(called);
}

TEST_CASE("webhook helpers format time and hide URL secrets", "[webhook]") {
  CHECK(fo::actions::iso8601_utc(fo::core::instant_from_ms(0)) == "1970-01-01T00:00:00.000Z");
  CHECK(fo::actions::iso8601_utc(fo::core::instant_from_ms(1796032501250)) ==
        "2026-11-30T09:55:01.250Z");
  CHECK(fo::actions::url_host("https://user:pw@hooks.example.com:8443/a/b?c") ==
        "hooks.example.com:8443");
  CHECK(fo::actions::url_host("http://[::1]:80") == "[::1]:80");
  StepContext c = context();
  c.reason = std::string("bad \xff utf8");
  const auto j =
      nlohmann::json::parse(fo::actions::webhook_payload(c, fo::core::instant_from_ms(0)));
  CHECK(j.at("ts") == "1970-01-01T00:00:00.000Z");
  CHECK(j.at("reason").get<std::string>().rfind("bad ", 0) == 0);
}
