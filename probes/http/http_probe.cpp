// HTTP(S) probe on the shared CurlMulti (see http_probe.hpp).
#include "probes/http/http_probe.hpp"

#include <curl/curl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <regex>
#include <string_view>
#include <utility>

namespace fo::probes {
namespace {

constexpr long kMaxTimeoutMs = 10L * 60 * 1000;  // a probe stuck longer than this is useless
constexpr std::size_t kMaxErrorText = 200;
constexpr std::size_t kMaxNeedleInError = 64;
constexpr const char* kUserAgent = "failoverd/0.1";

struct SlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using SlistPtr = std::unique_ptr<curl_slist, SlistFree>;

struct EasyCleanup {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
using EasyPtr = std::unique_ptr<CURL, EasyCleanup>;

// State of one check. Owned by the completion callback, so it lives as long as the easy handle
// that points into it (CurlMulti cleans up the handle before dropping the callback).
struct Check {
  config::HttpProbe spec;  // a copy: a config reload must not change a running check
  long timeout_ms = 0;
  std::string body;  // kept only when spec.body_contains or spec.body_regex is set
  std::size_t received = 0;
  bool too_large = false;
  SlistPtr headers;
  SlistPtr connect_to;
  char errbuf[CURL_ERROR_SIZE] = {};
  std::function<void(ProbeResult)> done;
};

std::string shorten(std::string_view text, std::size_t limit) {
  std::string out(text.substr(0, limit));
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  if (text.size() > limit) out += "...";
  return out;
}

std::string too_large_text(const Check& c) {
  return "response larger than " + std::to_string(c.spec.max_body) + " bytes";
}

std::size_t on_body(char* data, std::size_t size, std::size_t nmemb, void* userp) {
  auto* c = static_cast<Check*>(userp);
  const std::size_t n = size * nmemb;
  if (n > c->spec.max_body - c->received) {
    c->too_large = true;
    return 0;  // anything but n aborts the transfer with CURLE_WRITE_ERROR
  }
  c->received += n;
  if (!c->spec.body_contains.empty() || !c->spec.body_regex.empty()) c->body.append(data, n);
  return n;
}

// CURLOPT_SOCKOPTFUNCTION for the probe's abortive_close.
int set_abortive_close(void*, curl_socket_t fd, curlsocktype purpose) {
  if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKOPT_OK;
  const linger no_linger{1, 0};
  // A failure only means an ordinary close; the check itself is unaffected.
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &no_linger, sizeof no_linger);
  return CURL_SOCKOPT_OK;
}

std::string describe_failure(const Check& c, CURLcode rc, CURL* easy) {
  long os_errno = 0;
  curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno);
  const std::string detail = c.errbuf[0] ? c.errbuf : curl_easy_strerror(rc);
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      return "timeout after " + std::to_string(c.timeout_ms) + " ms";
    case CURLE_FILESIZE_EXCEEDED:
      return too_large_text(c);
    case CURLE_WRITE_ERROR:
      if (c.too_large) return too_large_text(c);
      break;
    case CURLE_COULDNT_CONNECT:
      if (os_errno == ECONNREFUSED) return "connection refused";
      if (os_errno != 0) return "connect failed: " + std::string(std::strerror(os_errno));
      break;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
      if (os_errno == ECONNRESET) return "connection reset";
      break;
    case CURLE_GOT_NOTHING:
      return "empty reply from server";
    case CURLE_INTERFACE_FAILED:
      return shorten("cannot bind source: " + detail, kMaxErrorText);
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
      return shorten("TLS: " + detail, kMaxErrorText);
    default:
      break;
  }
  return shorten(detail, kMaxErrorText);
}

ProbeResult judge(const Check& c, CURLcode rc, CURL* easy) {
  ProbeResult r;
  if (!easy) {
    r.error = "cannot create request";
    return r;
  }
  curl_off_t total_us = 0;
  curl_easy_getinfo(easy, CURLINFO_TOTAL_TIME_T, &total_us);
  r.latency_ms = static_cast<double>(total_us) / 1000.0;
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  r.http_status = static_cast<int>(status);
  if (rc != CURLE_OK) {
    r.error = describe_failure(c, rc, easy);
    return r;
  }
  if (!status_expected(r.http_status, c.spec.expect_status)) {
    r.error =
        "status " + std::to_string(status) + " not in " + describe_statuses(c.spec.expect_status);
    return r;
  }
  if (!c.spec.body_contains.empty() && c.body.find(c.spec.body_contains) == std::string::npos) {
    r.error = "body does not contain \"" + shorten(c.spec.body_contains, kMaxNeedleInError) + "\"";
    return r;
  }
  if (!c.spec.body_regex.empty() && !body_matches(c.spec.body_regex, c.body)) {
    r.error = "body does not match /" + shorten(c.spec.body_regex, kMaxNeedleInError) + "/";
    return r;
  }
  r.ok = true;
  return r;
}

// Returns "" or why the header cannot be sent as is (CR/LF would let a header inject others).
std::string header_problem(const std::string& name, const std::string& value) {
  auto bad = [](char ch) { return ch == '\r' || ch == '\n' || ch == '\0'; };
  if (name.empty() || std::any_of(name.begin(), name.end(), [&](char ch) {
        return bad(ch) || ch == ':' || ch == ' ' || ch == '\t';
      }))
    return "invalid header name \"" + shorten(name, kMaxNeedleInError) + "\"";
  if (std::any_of(value.begin(), value.end(), bad))
    return "invalid value for header " + shorten(name, kMaxNeedleInError);
  return "";
}

}  // namespace

bool body_matches(const std::string& pattern, std::string_view body) {
  // Same flags as the config loader's validation: __polynomial (libstdc++) makes the matcher a
  // breadth-first NFA, so neither the body nor the pattern can blow the stack or go exponential.
  // regex_search would restart that NFA at every offset (quadratic); one regex_match over
  // "anything, pattern, anything" is a single linear pass with the same meaning.
  try {
    const std::regex re("[\\s\\S]*?(?:" + pattern + ")[\\s\\S]*",
                        std::regex::ECMAScript | std::regex_constants::__polynomial);
    body = body.substr(0, config::HttpProbe::kMaxRegexBody);
    return std::regex_match(body.begin(), body.end(), re);
  } catch (const std::regex_error&) {
    return false;
  }
}

std::string connect_to_for(const std::string& resolve) {
  if (resolve.empty()) return "";
  // "HOST:PORT:TO-HOST:TO-PORT" with HOST, PORT and TO-PORT empty: any host and port of this
  // handle connect to `resolve` on the same port. Unlike CURLOPT_RESOLVE it does not seed the
  // DNS cache that every transfer of the shared multi handle uses.
  const bool v6 = resolve.find(':') != std::string::npos;
  return "::" + (v6 ? "[" + resolve + "]" : resolve) + ":";
}

bool status_expected(int status, const std::vector<config::StatusRange>& expected) {
  return std::any_of(expected.begin(), expected.end(), [&](const config::StatusRange& r) {
    return status >= r.lo && status <= r.hi;
  });
}

std::string describe_statuses(const std::vector<config::StatusRange>& expected) {
  std::string out;
  for (const auto& r : expected) {
    if (!out.empty()) out += ',';
    out += std::to_string(r.lo);
    if (r.hi != r.lo) out += "-" + std::to_string(r.hi);
  }
  return out.empty() ? "{}" : out;
}

std::string curl_interface_for(const config::Location& from) {
  const bool has_if = !from.interface.empty();
  const bool has_addr = !from.source_address.empty();
  if (has_if && has_addr) {
    // "ifhost!" (interface and address together) exists only from curl 8.9.0; older curl binds
    // the address, which decides the route in source-based routing setups.
    if (curl_version_info(CURLVERSION_NOW)->version_num >= 0x080900)
      return "ifhost!" + from.interface + "!" + from.source_address;
    return "host!" + from.source_address;
  }
  if (has_addr) return "host!" + from.source_address;
  if (has_if) return "if!" + from.interface;
  return "";
}

void HttpProber::start(const config::HttpProbe& spec, const config::Location& from,
                       std::function<void(ProbeResult)> done) {
  auto check = std::make_shared<Check>();
  check->spec = spec;
  check->timeout_ms = std::clamp<long>(static_cast<long>(spec.timeout.count()), 1, kMaxTimeoutMs);
  check->done = std::move(done);

  // Set-up failures still answer from the loop, never inside start().
  auto fail_later = [&](std::string why) {
    multi_.post([check, why = std::move(why)] {
      ProbeResult r;
      r.error = why;
      check->done(std::move(r));
    });
  };

  if (spec.method != "GET" && spec.method != "HEAD")
    return fail_later("unsupported method " + shorten(spec.method, kMaxNeedleInError));

  for (const auto& [name, value] : spec.headers) {
    if (auto problem = header_problem(name, value); !problem.empty()) return fail_later(problem);
    // "Name;" is curl's spelling of a header with an empty value ("Name:" would remove it).
    const std::string line = value.empty() ? name + ";" : name + ": " + value;
    curl_slist* grown = curl_slist_append(check->headers.get(), line.c_str());
    if (!grown) return fail_later("out of memory");
    check->headers.release();
    check->headers.reset(grown);
  }

  // A pooled handle saves curl's per-handle allocation and set-up; curl_easy_reset has put
  // every option back to its default (no header, body or source address of an earlier check).
  EasyPtr easy(multi_.take_easy());
  if (!easy) return fail_later("cannot create request");
  CURL* h = easy.get();
  std::string failed_option;
  auto set = [&](CURLoption opt, auto value, const char* name) {
    if (failed_option.empty() && curl_easy_setopt(h, opt, value) != CURLE_OK) failed_option = name;
  };
  const std::string interface = curl_interface_for(from);

  set(CURLOPT_ERRORBUFFER, check->errbuf, "ERRORBUFFER");
  set(CURLOPT_URL, spec.url.c_str(), "URL");
  set(CURLOPT_PROTOCOLS_STR, "http,https", "PROTOCOLS_STR");
  set(CURLOPT_FOLLOWLOCATION, 0L, "FOLLOWLOCATION");
  set(CURLOPT_NOSIGNAL, 1L, "NOSIGNAL");
  set(CURLOPT_TIMEOUT_MS, check->timeout_ms, "TIMEOUT_MS");
  if (spec.method == "HEAD")
    set(CURLOPT_NOBODY, 1L, "NOBODY");
  else
    set(CURLOPT_HTTPGET, 1L, "HTTPGET");
  if (check->headers) set(CURLOPT_HTTPHEADER, check->headers.get(), "HTTPHEADER");
  set(CURLOPT_USERAGENT, kUserAgent, "USERAGENT");
  set(CURLOPT_SSL_VERIFYPEER, spec.tls_verify ? 1L : 0L, "SSL_VERIFYPEER");
  set(CURLOPT_SSL_VERIFYHOST, spec.tls_verify ? 2L : 0L, "SSL_VERIFYHOST");
  if (!spec.ca_file.empty()) set(CURLOPT_CAINFO, spec.ca_file.c_str(), "CAINFO");
  if (!spec.client_cert.empty()) set(CURLOPT_SSLCERT, spec.client_cert.c_str(), "SSLCERT");
  if (!spec.client_key.empty()) set(CURLOPT_SSLKEY, spec.client_key.c_str(), "SSLKEY");
  if (!spec.resolve.empty()) {
    SlistPtr grown(curl_slist_append(nullptr, connect_to_for(spec.resolve).c_str()));
    if (!grown) return fail_later("out of memory");
    check->connect_to = std::move(grown);
    set(CURLOPT_CONNECT_TO, check->connect_to.get(), "CONNECT_TO");
  }
  set(CURLOPT_WRITEFUNCTION, &on_body, "WRITEFUNCTION");
  set(CURLOPT_WRITEDATA, static_cast<void*>(check.get()), "WRITEDATA");
  set(CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(spec.max_body), "MAXFILESIZE_LARGE");
  set(CURLOPT_PROXY, "", "PROXY");  // "" = no proxy, whatever http_proxy etc. say
  if (!interface.empty()) set(CURLOPT_INTERFACE, interface.c_str(), "INTERFACE");
  // A probe must see what a new client sees: its own connect and TLS handshake.
  set(CURLOPT_FRESH_CONNECT, 1L, "FRESH_CONNECT");
  set(CURLOPT_FORBID_REUSE, 1L, "FORBID_REUSE");
  if (spec.abortive_close) set(CURLOPT_SOCKOPTFUNCTION, &set_abortive_close, "SOCKOPTFUNCTION");
  // The handle is reused and curl_easy_reset keeps its TLS session cache: no resumption.
  set(CURLOPT_SSL_SESSIONID_CACHE, 0L, "SSL_SESSIONID_CACHE");
  if (!failed_option.empty()) return fail_later("cannot set up request (" + failed_option + ")");

  multi_.add(
      easy.release(),
      [check](CURLcode rc, CURL* handle) { check->done(judge(*check, rc, handle)); },
      platform::CurlMulti::AfterDone::reuse);
}

}  // namespace fo::probes
