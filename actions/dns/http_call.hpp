// One HTTP request of the dns step's PowerDNS provider, on the daemon's CurlMulti (no thread,
// no blocking). Destroying the call drops its callback at once; the transfer itself ends
// within its own timeout (CurlMulti cannot abort a single transfer).
#pragma once

#include <memory>
#include <string>

#include "daemon/core/types.hpp"
#include "daemon/platform/curl_multi.hpp"

namespace fo::actions::dns {

struct HttpResult {
  bool transport_ok = false;  // a status line arrived
  bool timed_out = false;
  long status = 0;
  std::string body;   // at most kMaxHttpBody bytes
  std::string error;  // curl's error phrase when !transport_ok
};

inline constexpr std::size_t kMaxHttpBody = 64 * 1024;

class HttpCall {
 public:
  using Done = std::function<void(HttpResult)>;
  // `api_key` goes into an X-API-Key header only. `body` is sent as application/json when not
  // empty. `done` runs once, from the loop.
  HttpCall(platform::CurlMulti& curl, const std::string& method, const std::string& url,
           const std::string& api_key, const std::string& body, core::Millis timeout, Done done);
  ~HttpCall();
  HttpCall(const HttpCall&) = delete;
  HttpCall& operator=(const HttpCall&) = delete;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace fo::actions::dns
