// Remote probe agent client (see agent_client.hpp and docs/agent-protocol.md).
#include "probes/agent_client.hpp"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "actions/secret_file.hpp"
#include "daemon/platform/event.hpp"
#include "probes/net.hpp"

namespace fo::probes {
namespace {

struct SlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using SlistPtr = std::unique_ptr<curl_slist, SlistFree>;
struct EasyCleanup {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
using EasyPtr = std::unique_ptr<CURL, EasyCleanup>;

constexpr core::Millis kMinTime{20};
constexpr core::Millis kMaxRetryAfter{3600 * 1000};

std::string seconds_text(core::Millis d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", d.count() / 1000.0);
  return buf;
}

}  // namespace

// One request in flight. Owned by its CurlMulti completion callback, so the buffers the easy
// handle points into live exactly as long as the handle.
struct AgentClient::Exchange {
  std::vector<agent::WireProbe> asked;
  uint64_t round = 0;
  core::Millis timeout{0};
  std::string request;
  std::string reply;
  std::size_t cap = 0;
  bool too_large = false;
  SlistPtr headers;
  char errbuf[CURL_ERROR_SIZE] = {};
  std::function<void(AgentOutcome)> done;

  static std::size_t on_data(char* data, std::size_t size, std::size_t nmemb, void* userp) {
    auto* x = static_cast<Exchange*>(userp);
    const std::size_t n = size * nmemb;
    if (x->reply.size() + n > x->cap) {
      x->too_large = true;
      return 0;  // aborts with CURLE_WRITE_ERROR
    }
    x->reply.append(data, n);
    return n;
  }
};

AgentClient::AgentClient(platform::CurlMulti& curl, config::Location location,
                         AgentClientOptions options)
    : curl_(curl),
      location_(std::move(location)),
      options_(options),
      rng_(options.seed ? options.seed : std::random_device{}()) {}

AgentClient::~AgentClient() {
  *alive_ = false;
}

core::Millis AgentClient::now() const {
  return platform::mono_now(curl_.event());
}

bool AgentClient::backing_off() const {
  return backoff_until_ > now();
}

core::Millis AgentClient::backoff_left() const {
  return std::max(core::Millis(0), backoff_until_ - now());
}

std::string AgentClient::status() const {
  if (last_error_.empty()) return "";
  if (backing_off())
    return last_error_ + " (backing off, next try in " + seconds_text(backoff_until_ - now()) + ")";
  return last_error_;
}

void AgentClient::note_failure(const std::string& why, core::Millis retry_after) {
  ++failures_;
  const int shift = std::min(failures_ - 1, 20);
  const int64_t base =
      std::min<int64_t>(options_.backoff_initial.count() << shift, options_.backoff_max.count());
  // "Equal jitter": at least half the exponential delay, so agents failing together do not
  // come back together, and the delay still grows.
  const int64_t jittered =
      base / 2 + std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(base / 2, 0))(rng_);
  const int64_t wait = std::max(jittered, std::min(retry_after, kMaxRetryAfter).count());
  backoff_until_ = now() + core::Millis(wait);
  if (why != last_error_)
    spdlog::warn("location {}: agent {}: {}; no results from it for {}", location_.name,
                 location_.agent.url, why, seconds_text(core::Millis(wait)));
  last_error_ = why;
}

void AgentClient::query(const std::string& group, uint64_t round, core::Millis deadline,
                        const std::vector<agent::WireProbe>& probes,
                        std::function<void(AgentOutcome)> done) {
  auto give_up = [&](std::string why) {
    AgentOutcome o;
    o.error = std::move(why);
    curl_.post([done = std::move(done), o = std::move(o)] { done(o); });
  };
  if (backing_off())
    return give_up("agent: backing off (" + seconds_text(backoff_until_ - now()) +
                   " left) after: " + last_error_);
  core::Millis timeout = deadline;
  if (location_.agent.timeout.count() > 0) timeout = std::min(timeout, location_.agent.timeout);
  if (timeout < kMinTime) return give_up("agent: no time left in the round");
  const actions::SecretRead token = actions::read_secret_file(location_.agent.token_file);
  if (!token.ok) return give_up("agent: token_file: " + token.error);
  if (std::string problem = agent::token_problem(token.value); !problem.empty())
    return give_up("agent: token in " + location_.agent.token_file + " " + problem);

  auto x = std::make_shared<Exchange>();
  x->asked = probes;
  x->round = round;
  x->timeout = timeout;
  x->cap = options_.max_reply_bytes;
  x->done = std::move(done);
  // The agent must answer before we stop listening: give it a little less than our own limit.
  const core::Millis margin = std::clamp(timeout / 10, core::Millis(5), core::Millis(500));
  x->request = agent::make_request(group, round, timeout - margin, probes).dump();

  EasyPtr easy(curl_easy_init());
  if (!easy) return give_up("agent: curl_easy_init failed");
  CURL* e = easy.get();
  const std::string url = location_.agent.url + std::string(agent::kProbePath);
  curl_slist* h = nullptr;
  h = curl_slist_append(h, ("Authorization: Bearer " + token.value).c_str());
  if (h) h = curl_slist_append(h, "Content-Type: application/json");
  if (h) h = curl_slist_append(h, "Expect:");  // no 100-continue round trip
  x->headers.reset(h);
  if (!h) return give_up("agent: out of memory");
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers.get());
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->request.c_str());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(x->request.size()));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, long(timeout.count()));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, long(timeout.count()));
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Exchange::on_data);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, x.get());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "failoverd-agent-client/1");
  curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
  if (!location_.agent.ca_file.empty())
    curl_easy_setopt(e, CURLOPT_CAINFO, location_.agent.ca_file.c_str());
  if (!location_.agent.tls_verify) {
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  ++sent_;
  std::weak_ptr<bool> alive = alive_;
  curl_.add(easy.release(), [this, alive, x](CURLcode rc, CURL* handle) {
    if (alive.expired()) return;
    AgentOutcome o;
    long status = 0;
    curl_off_t retry_after = 0;
    if (rc == CURLE_OK) {
      curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
      curl_easy_getinfo(handle, CURLINFO_RETRY_AFTER, &retry_after);
    }
    if (rc != CURLE_OK) {
      if (x->too_large)
        o.error = "agent: reply larger than " + std::to_string(x->cap) + " bytes";
      else if (rc == CURLE_OPERATION_TIMEDOUT)
        o.error = "agent: no answer within " + std::to_string(x->timeout.count()) + " ms";
      else if (rc == CURLE_COULDNT_CONNECT)
        o.error = "agent: cannot connect: " + shorten(x->errbuf[0] ? x->errbuf : "refused", 120);
      else
        o.error = "agent: " + shorten(x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc), 160);
    } else if (status == 200) {
      agent::ParsedReply parsed = agent::parse_reply(x->reply, x->round, x->asked);
      o.ok = parsed.ok;
      o.results = std::move(parsed.results);
      if (!parsed.ok) o.error = "agent: invalid " + parsed.error;
    } else {
      std::string detail;
      const auto j = nlohmann::json::parse(x->reply, nullptr, false);
      if (j.is_object() && j.contains("error") && j["error"].is_string())
        detail = ": " + shorten(j["error"].get<std::string>(), 160);
      o.error = "agent: HTTP " + std::to_string(status) +
                (status == 503   ? " (overloaded)"
                 : status == 401 ? " (token refused)"
                                 : "") +
                detail;
    }
    finish(*x, std::move(o), core::Millis(int64_t(retry_after) * 1000));
  });
}

void AgentClient::finish(Exchange& x, AgentOutcome outcome, core::Millis retry_after) {
  if (outcome.ok) {
    if (!last_error_.empty())
      spdlog::info("location {}: agent {} answers again", location_.name, location_.agent.url);
    failures_ = 0;
    backoff_until_ = core::Millis(0);
    last_error_.clear();
  } else {
    note_failure(outcome.error, retry_after);
  }
  auto done = std::move(x.done);
  x.done = nullptr;
  if (done) done(std::move(outcome));
}

}  // namespace fo::probes
