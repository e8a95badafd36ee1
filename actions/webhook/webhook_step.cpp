// The `webhook` step kind (see webhook_step.hpp and docs/steps/webhook.md).
#include "actions/webhook/webhook_step.hpp"

#include <curl/curl.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <utility>

#include "actions/secret_file.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "daemon/platform/event.hpp"

namespace fo::actions {
namespace {

constexpr long kMaxTimeoutMs = 60L * 60 * 1000;  // the config caps step timeouts at 1 h
constexpr std::size_t kMaxOutput = 512;          // response excerpt kept for history
constexpr std::size_t kMaxErrorText = 200;
constexpr const char* kUserAgent = "failoverd/0.1";

struct SlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using SlistPtr = std::unique_ptr<curl_slist, SlistFree>;

struct EasyCleanup {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
using EasyPtr = std::unique_ptr<CURL, EasyCleanup>;

// Replies are untrusted: keep printable ASCII only, so history and JSON stay well-formed.
std::string printable(std::string_view text, std::size_t limit) {
  std::string out;
  out.reserve(std::min(text.size(), limit) + 3);
  for (char c : text.substr(0, limit)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : (c == '\n' || c == '\r' || c == '\t') ? ' ' : '?';
  }
  if (text.size() > limit) out += "...";
  return out;
}

void replace_all(std::string& text, const std::string& what, const std::string& with) {
  if (what.empty()) return;
  for (std::size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + with.size()))
    text.replace(at, what.size(), with);
}

// A token whose bytes could end the header line would let the file inject headers.
bool token_usable(const std::string& token) {
  return std::none_of(token.begin(), token.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

SecretRead read_token(const std::string& path) {
  SecretRead token = read_secret_file(path);
  if (token.ok && !token_usable(token.value)) {
    explicit_bzero(token.value.data(), token.value.size());
    token = SecretRead{};
    token.error = "token file " + path + " contains control characters or line breaks";
  }
  return token;
}

bool retryable_status(long status) {
  return status == 408 || status == 429 || status >= 500;
}

class WebhookAttempt final : public StepAttempt {
 public:
  WebhookAttempt(sd_event* event, const config::Step& step, const StepContext& ctx, StepDone done)
      : spec_(step.webhook), done_(std::move(done)), multi_(event) {
    host_ = url_host(spec_.url);
    timeout_ms_ = std::clamp<long>(static_cast<long>(step.timeout.count()), 1, kMaxTimeoutMs);
    payload_ = webhook_payload(ctx, platform::wall_now(event));
    start(ctx);
  }

  ~WebhookAttempt() override {
    multi_.cancel_all();
    explicit_bzero(token_.data(), token_.size());
    explicit_bzero(auth_line_.data(), auth_line_.size());
  }

 private:
  void fail_later(std::string why, bool retryable) {
    multi_.post(
        [this, why = std::move(why), retryable] { finish(StepOutcome::failure(why, retryable)); });
  }

  bool append_header(const std::string& line) {
    curl_slist* grown = curl_slist_append(headers_.get(), line.c_str());
    if (!grown) return false;
    headers_.release();
    headers_.reset(grown);
    return true;
  }

  void start(const StepContext& ctx) {
    if (!spec_.token_file.empty()) {
      SecretRead token = read_token(spec_.token_file);
      if (!token.ok) return fail_later(token.error, false);
      token_ = std::move(token.value);
      auth_line_ = "Authorization: Bearer " + token_;
    }
    if (ctx.idempotency_key.empty() || !token_usable(ctx.idempotency_key))
      return fail_later("invalid idempotency key", false);
    bool ok = append_header("Content-Type: application/json") &&
              append_header("Idempotency-Key: " + ctx.idempotency_key) &&
              append_header("Expect:");  // no 100-continue round trip
    if (ok && !auth_line_.empty()) ok = append_header(auth_line_);
    for (const auto& [name, value] : spec_.headers) {
      if (!ok) break;
      // "Name;" is curl's spelling of a header with an empty value ("Name:" would remove it).
      ok = append_header(value.empty() ? name + ";" : name + ": " + value);
    }
    if (!ok) return fail_later("out of memory", true);

    EasyPtr easy(curl_easy_init());
    if (!easy) return fail_later("cannot create request", true);
    CURL* h = easy.get();
    std::string failed_option;
    auto set = [&](CURLoption opt, auto value, const char* name) {
      if (failed_option.empty() && curl_easy_setopt(h, opt, value) != CURLE_OK)
        failed_option = name;
    };
    set(CURLOPT_ERRORBUFFER, errbuf_, "ERRORBUFFER");
    set(CURLOPT_URL, spec_.url.c_str(), "URL");
    set(CURLOPT_PROTOCOLS_STR, "http,https", "PROTOCOLS_STR");
    set(CURLOPT_FOLLOWLOCATION, 0L, "FOLLOWLOCATION");
    set(CURLOPT_NOSIGNAL, 1L, "NOSIGNAL");
    set(CURLOPT_TIMEOUT_MS, timeout_ms_, "TIMEOUT_MS");
    set(CURLOPT_POST, 1L, "POST");
    set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(payload_.size()),
        "POSTFIELDSIZE_LARGE");
    set(CURLOPT_POSTFIELDS, payload_.c_str(), "POSTFIELDS");
    set(CURLOPT_HTTPHEADER, headers_.get(), "HTTPHEADER");
    set(CURLOPT_USERAGENT, kUserAgent, "USERAGENT");
    set(CURLOPT_SSL_VERIFYPEER, spec_.tls_verify ? 1L : 0L, "SSL_VERIFYPEER");
    set(CURLOPT_SSL_VERIFYHOST, spec_.tls_verify ? 2L : 0L, "SSL_VERIFYHOST");
    if (!spec_.ca_file.empty()) set(CURLOPT_CAINFO, spec_.ca_file.c_str(), "CAINFO");
    set(CURLOPT_WRITEFUNCTION, &WebhookAttempt::on_body, "WRITEFUNCTION");
    set(CURLOPT_WRITEDATA, static_cast<void*>(this), "WRITEDATA");
    set(CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(spec_.max_response),
        "MAXFILESIZE_LARGE");
    set(CURLOPT_PROXY, "", "PROXY");  // "" = no proxy, whatever http_proxy etc. say
    if (!failed_option.empty())
      return fail_later("cannot set up request (" + failed_option + ")", false);
    multi_.add(easy.release(), [this](CURLcode rc, CURL* handle) { finish(judge(rc, handle)); });
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t nmemb, void* userp) {
    auto* self = static_cast<WebhookAttempt*>(userp);
    const std::size_t n = size * nmemb;
    if (n > self->spec_.max_response - self->body_.size()) {
      self->too_large_ = true;
      return 0;  // anything but n aborts the transfer with CURLE_WRITE_ERROR
    }
    self->body_.append(data, n);
    return n;
  }

  std::string transport_error(CURLcode rc) const {
    if (rc == CURLE_OPERATION_TIMEDOUT)
      return "no answer from " + host_ + " within " + std::to_string(timeout_ms_) + " ms";
    if (rc == CURLE_GOT_NOTHING) return "empty reply from " + host_;
    const std::string text = errbuf_[0] ? errbuf_ : curl_easy_strerror(rc);
    return "cannot deliver to " + host_ + ": " + printable(text, kMaxErrorText);
  }

  StepOutcome judge(CURLcode rc, CURL* easy) {
    if (!easy) return StepOutcome::failure("cannot create request");
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_off_t total_us = 0;
    curl_easy_getinfo(easy, CURLINFO_TOTAL_TIME_T, &total_us);
    const long ms = static_cast<long>(total_us / 1000);
    const bool cut = too_large_ || rc == CURLE_FILESIZE_EXCEEDED;
    const bool got_status =
        status >= 200 &&
        (rc == CURLE_OK || (cut && (rc == CURLE_WRITE_ERROR || rc == CURLE_FILESIZE_EXCEEDED)));
    StepOutcome out;
    if (!got_status) {
      out = StepOutcome::failure(
          transport_error(rc), rc != CURLE_SSL_CACERT_BADFILE && rc != CURLE_UNSUPPORTED_PROTOCOL);
      if (rc == CURLE_OPERATION_TIMEDOUT) out.status = StepOutcome::Status::timed_out;
    } else {
      const std::string note =
          cut ? " (response cut at " + std::to_string(spec_.max_response) + " bytes)" : "";
      const std::string head = "HTTP " + std::to_string(status);
      if (status >= 200 && status <= 299)
        out =
            StepOutcome::success("delivered: " + head + " in " + std::to_string(ms) + " ms" + note);
      else if (status >= 300 && status <= 399)
        out = StepOutcome::failure(head + " from " + host_ + " (redirects are not followed)" + note,
                                   false);
      else
        out = StepOutcome::failure(
            head + " from " + host_ + " in " + std::to_string(ms) + " ms" + note,
            retryable_status(status));
    }
    out.duration = core::Millis(ms);
    out.output = printable(body_, kMaxOutput);
    return out;
  }

  // Nothing the receiver sent back or curl said may carry the token or the URL's secret path.
  void scrub(std::string& text) const {
    replace_all(text, token_, "[token]");
    const auto path_at = spec_.url.find('/', spec_.url.find("://") + 3);
    if (path_at != std::string::npos && spec_.url.size() - path_at > 1)
      replace_all(text, spec_.url.substr(path_at), "/[path]");
  }

  void finish(StepOutcome outcome) {
    scrub(outcome.detail);
    scrub(outcome.output);
    StepDone done = std::move(done_);
    done(std::move(outcome));  // may destroy *this
  }

  config::WebhookStep spec_;
  StepDone done_;
  std::string host_;
  long timeout_ms_ = 0;
  std::string payload_;
  std::string token_;
  std::string auth_line_;
  SlistPtr headers_;
  std::string body_;
  bool too_large_ = false;
  char errbuf_[CURL_ERROR_SIZE] = {};
  // Declared last: destroyed first, so a transfer never outlives the buffers it points into.
  platform::CurlMulti multi_;
};

// check(): the token file must be readable; no request is sent.
class TokenCheck final : public StepAttempt {
 public:
  TokenCheck(sd_event* event, std::string path, StepDone done)
      : path_(std::move(path)), done_(std::move(done)), defer_(event, [this] { run(); }) {
    defer_.schedule();
  }

 private:
  void run() {
    SecretRead token = read_token(path_);
    explicit_bzero(token.value.data(), token.value.size());
    StepOutcome out = token.ok ? StepOutcome::success("token file " + path_ + " is readable")
                               : StepOutcome::failure(token.error, false);
    StepDone done = std::move(done_);
    done(std::move(out));  // may destroy *this
  }

  std::string path_;
  StepDone done_;
  platform::Defer defer_;
};

class WebhookPlugin final : public StepPlugin {
 public:
  explicit WebhookPlugin(sd_event* event) : event_(event) {}

  std::unique_ptr<StepAttempt> apply(const config::Step& step, const StepContext& ctx,
                                     StepDone done) override {
    return std::make_unique<WebhookAttempt>(event_, step, ctx, std::move(done));
  }

  std::unique_ptr<StepAttempt> check(const config::Step& step, const StepContext& ctx,
                                     StepDone done) override {
    (void)ctx;
    if (step.webhook.token_file.empty()) return nullptr;
    return std::make_unique<TokenCheck>(event_, step.webhook.token_file, std::move(done));
  }

 private:
  sd_event* event_;
};

}  // namespace

std::string iso8601_utc(core::Instant t) {
  const std::int64_t ms = core::to_ms(t);
  std::int64_t secs = ms / 1000;
  std::int64_t frac = ms % 1000;
  if (frac < 0) {
    frac += 1000;
    --secs;
  }
  const std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(frac));
  return buf;
}

std::string webhook_payload(const StepContext& ctx, core::Instant ts) {
  nlohmann::json j = {{"group", ctx.group},
                      {"phase", std::string(core::to_string(ctx.phase))},
                      {"from", std::string(core::to_string(ctx.from))},
                      {"to", std::string(core::to_string(ctx.target))},
                      {"reason", ctx.reason},
                      {"initiator", ctx.initiator},
                      {"plan_id", ctx.plan_id},
                      {"term", ctx.term},
                      {"idempotency_key", ctx.idempotency_key},
                      {"ts", iso8601_utc(ts)}};
  // A reason with invalid UTF-8 must not throw: replace, don't fail the notification.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string url_host(const std::string& url) {
  const auto scheme_end = url.find("://");
  std::string rest = scheme_end == std::string::npos ? url : url.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (const auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  return printable(rest, 256);
}

std::unique_ptr<StepPlugin> make_webhook_step_plugin(sd_event* event) {
  return std::make_unique<WebhookPlugin>(event);
}

}  // namespace fo::actions
