// HTTP(S) probe: one check = one libcurl easy handle on the daemon's shared CurlMulti, so a
// round of many probes costs no threads and never blocks the loop.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "daemon/config/config.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "probes/probe.hpp"

namespace fo::probes {

class HttpProber {
 public:
  explicit HttpProber(platform::CurlMulti& multi) : multi_(multi) {}

  // Starts one check of `spec` from location `from` (source address / interface). `done` runs
  // exactly once, from the loop, never inside start() -- unless the CurlMulti is cancelled or
  // destroyed first, which drops it. Redirects are not followed (a 3xx is judged as is), no
  // proxy is used, every check opens a fresh connection.
  void start(const config::HttpProbe& spec, const config::Location& from,
             std::function<void(ProbeResult)> done);

 private:
  platform::CurlMulti& multi_;
};

// Helpers exposed for tests.
bool status_expected(int status, const std::vector<config::StatusRange>& expected);
std::string describe_statuses(const std::vector<config::StatusRange>& expected);  // "200-399"
// Value for CURLOPT_INTERFACE, "" for none.
std::string curl_interface_for(const config::Location& from);

}  // namespace fo::probes
