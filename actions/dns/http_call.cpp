// One HTTP request on the loop (see http_call.hpp).
#include "actions/dns/http_call.hpp"

#include <algorithm>

namespace fo::actions::dns {
namespace {

struct SlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

size_t on_body(char* data, size_t size, size_t n, void* userp) {
  auto* body = static_cast<std::string*>(userp);
  const size_t len = size * n;
  // Keep the head of an oversized body and swallow the rest: a reply may be large or hostile.
  if (body->size() < kMaxHttpBody) body->append(data, std::min(len, kMaxHttpBody - body->size()));
  return len;
}

}  // namespace

struct HttpCall::State {
  bool cancelled = false;
  std::string body_out;
  std::string body_in;
  std::unique_ptr<curl_slist, SlistFree> headers;
  char errbuf[CURL_ERROR_SIZE] = {};
  Done done;
};

HttpCall::HttpCall(platform::CurlMulti& curl, const std::string& method, const std::string& url,
                   const std::string& api_key, const std::string& body, core::Millis timeout,
                   Done done)
    : state_(std::make_shared<State>()) {
  state_->done = std::move(done);
  state_->body_out = body;
  curl_slist* h = curl_slist_append(nullptr, ("X-API-Key: " + api_key).c_str());
  if (h && !body.empty()) h = curl_slist_append(h, "Content-Type: application/json");
  if (h) h = curl_slist_append(h, "Accept: application/json");
  state_->headers.reset(h);
  CURL* easy = curl_easy_init();
  if (easy) {
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, state_->errbuf);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy, CURLOPT_PROXY, "");
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (!state_->body_out.empty()) {
      curl_easy_setopt(easy, CURLOPT_POSTFIELDS, state_->body_out.c_str());
      curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(state_->body_out.size()));
    }
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, state_->headers.get());
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::max<long>(1, timeout.count())));
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, static_cast<void*>(&state_->body_in));
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "failoverd");
  }
  // The lambda keeps the state (headers, body buffers) alive until curl is done with them.
  std::shared_ptr<State> state = state_;
  curl.add(easy, [state](CURLcode code, CURL* e) {
    if (state->cancelled) return;
    HttpResult r;
    if (code == CURLE_OK) {
      r.transport_ok = true;
      curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r.status);
      r.body = std::move(state->body_in);
    } else {
      r.timed_out = code == CURLE_OPERATION_TIMEDOUT;
      r.error = state->errbuf[0] ? state->errbuf : curl_easy_strerror(code);
    }
    Done done = std::move(state->done);
    state->done = nullptr;
    if (done) done(std::move(r));
  });
}

HttpCall::~HttpCall() {
  state_->cancelled = true;
  state_->done = nullptr;
}

}  // namespace fo::actions::dns
