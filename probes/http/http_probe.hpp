// HTTP(S) probe: one check = one libcurl easy handle on the daemon's shared CurlMulti, so a
// round of many probes costs no threads and never blocks the loop.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/config/config.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "probes/plugin.hpp"
#include "probes/probe.hpp"

namespace fo::probes {

class HttpProber {
 public:
  explicit HttpProber(platform::CurlMulti& multi) : multi_(multi) {}

  // Starts one check of `spec` from location `from` (source address / interface). `done` runs
  // exactly once, from the loop, never inside start() -- unless the CurlMulti is cancelled or
  // destroyed first, which drops it. Redirects are not followed (a 3xx is judged as is), no
  // proxy is used, every check opens a fresh connection (and TLS resumes no session).
  void start(const config::HttpProbe& spec, const config::Location& from,
             std::function<void(ProbeResult)> done);

 private:
  platform::CurlMulti& multi_;
};

// The http kind as a ProbePlugin (see probes/plugin.hpp).
class HttpPlugin final : public ProbePlugin {
 public:
  explicit HttpPlugin(platform::CurlMulti& multi) : prober_(multi) {}
  void start(const config::Probe& probe, const config::Location& from,
             std::function<void(ProbeResult)> done) override {
    prober_.start(probe.http, from, std::move(done));
  }

 private:
  HttpProber prober_;
};

// Helpers exposed for tests.
// body_regex semantics: ECMAScript search in the first HttpProbe::kMaxRegexBody bytes.
bool body_matches(const std::string& pattern, std::string_view body);
// CURLOPT_CONNECT_TO entry for `resolve` ("::192.0.2.1:", "::[::1]:"), "" for none.
std::string connect_to_for(const std::string& resolve);
bool status_expected(int status, const std::vector<config::StatusRange>& expected);
std::string describe_statuses(const std::vector<config::StatusRange>& expected);  // "200-399"
// Value for CURLOPT_INTERFACE, "" for none.
std::string curl_interface_for(const config::Location& from);

}  // namespace fo::probes
