// Config of a `webhook` step: POST the transition as JSON (docs/steps/webhook.md).
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace fo::config {

struct WebhookStep {
  std::string url;                             // http:// or https://
  std::map<std::string, std::string> headers;  // extra request headers
  std::string token_file;  // optional: "Authorization: Bearer <token>" from this file
  bool tls_verify = true;
  std::string ca_file;
  std::size_t max_response = 64 * 1024;  // bytes of the response body read at most
  static constexpr std::size_t kMaxResponseLimit = 1024 * 1024;
};

}  // namespace fo::config
