// Config loader: the keys of a `webhook` step (see docs/steps/webhook.md).
#include <algorithm>
#include <cctype>

#include "daemon/config/config_parts.hpp"

namespace fo::config::detail {
namespace {

constexpr std::size_t kMaxUrlLen = 2048;
constexpr std::size_t kMaxHeaders = 32;
constexpr std::size_t kMaxHeaderValue = 4096;
constexpr std::size_t kMaxPathLen = 4096;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Headers failoverd sets itself: a second copy would be ambiguous to the receiver.
bool reserved_header(std::string_view name) {
  const std::string n = lower(name);
  return n == "content-type" || n == "content-length" || n == "idempotency-key" ||
         n == "transfer-encoding" || n == "host" || n == "expect";
}

void read_url(const TableReader& r, WebhookStep& out) {
  if (auto url = r.string("url", kMaxUrlLen)) {
    if (std::string problem = url_problem(*url); !problem.empty())
      r.error_at_value("url", r.path("url") + ": " + quote(*url) + " " + problem);
    else
      out.url = *url;
  } else if (!r.has("url")) {
    r.missing("url");
  }
}

void read_headers(const TableReader& r, WebhookStep& out) {
  auto v = r.string_map("headers", kMaxHeaders, kMaxHeaderValue, header_name_problem);
  if (!v) return;
  bool ok = true;
  for (const auto& [name, value] : *v) {
    if (reserved_header(name)) {
      r.error_at_value("headers", r.path("headers") + ": " + quote(name) +
                                      " is set by failoverd and cannot be configured");
      ok = false;
    } else if (lower(name) == "authorization" && r.has("token_file")) {
      r.error_at_value("headers", r.path("headers") +
                                      ": \"Authorization\" conflicts with token_file, which sets "
                                      "it");
      ok = false;
    } else if (std::any_of(value.begin(), value.end(),
                           [](char c) { return c == '\r' || c == '\n' || c == '\0'; })) {
      r.error_at_value("headers", r.path("headers") + ": the value of " + quote(name) +
                                      " contains a line break");
      ok = false;
    }
  }
  if (ok) out.headers = std::move(*v);
}

void read_max_response(const TableReader& r, WebhookStep& out) {
  const toml::node* n = r.node("max_response");
  if (!n) return;
  const std::string range = "from 1B to 1MB";
  if (n->is_integer()) {
    if (auto v = r.integer("max_response", 1, WebhookStep::kMaxResponseLimit))
      out.max_response = static_cast<std::size_t>(*v);
    return;
  }
  if (auto text = r.string("max_response", 64)) {
    std::optional<std::uint64_t> bytes = parse_size(*text);
    if (!bytes || *bytes == 0 || *bytes > WebhookStep::kMaxResponseLimit)
      r.error_at_value("max_response", r.path("max_response") + ": " + quote(*text) +
                                           " is not a size " + range + " (e.g. \"64kB\")");
    else
      out.max_response = static_cast<std::size_t>(*bytes);
  }
}

}  // namespace

std::vector<std::string_view> webhook_step_keys() {
  return {"url", "headers", "token_file", "tls_verify", "ca_file", "max_response"};
}

void parse_webhook_step(const TableReader& r, WebhookStep& out) {
  read_url(r, out);
  read_headers(r, out);
  if (auto v = r.string("token_file", kMaxPathLen)) {
    if (v->empty() || v->front() != '/')
      r.error_at_value("token_file",
                       r.path("token_file") + ": " + quote(*v) + " must be an absolute path");
    else
      out.token_file = *v;
  }
  if (auto v = r.boolean("tls_verify")) out.tls_verify = *v;
  read_path(r, "ca_file", out.ca_file);
  const bool https = r.has("url") && out.url.rfind("https://", 0) == 0;
  if (!out.url.empty() && !https) {
    if (!out.ca_file.empty())
      r.error_at_key("ca_file", r.path("ca_file") + ": needs an https:// url");
    if (r.has("tls_verify"))
      r.error_at_key("tls_verify", r.path("tls_verify") + ": needs an https:// url");
  }
  read_max_response(r, out);
}

}  // namespace fo::config::detail
