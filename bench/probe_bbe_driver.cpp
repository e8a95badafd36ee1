// Load driver for prometheus-blackbox-exporter in the probe benchmark: keeps C requests
// GET /probe?module=...&target=<base><i> in flight (i rotating over N targets) on kept-alive
// connections, for a fixed duration, and counts the answers whose body says probe_success 1.
// It reports its own CPU time so that probe_vs_blackbox.sh can show it apart from the
// exporter's. A plain curl_multi_poll loop: the cheapest driver libcurl offers.
//   probe_bbe_driver --probe-url URL --base URL [--targets N] [--duration S]
//                    [--concurrency C] [--cpu K] [--json]
#include <curl/curl.h>
#include <sched.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"

namespace {

using fo::bench::cpu_seconds;
using fo::bench::loopback_url;
using fo::bench::parse_long;
using fo::bench::pin_to_cpu;

constexpr long kMaxTargets = 1'000'000;
constexpr double kMaxDurationS = 3600;
constexpr long kMaxConcurrency = 1024;
constexpr std::size_t kMaxBody = 256 * 1024;  // an exporter answer is about 2 KB
constexpr long kRequestTimeoutMs = 30'000;

struct Options {
  std::string probe_url;  // e.g. http://127.0.0.1:9115/probe?module=http_2xx&target=
  std::string base;       // target i is base + i
  long targets = 2000;
  double duration_s = 10;
  long concurrency = 16;
  int cpu = -1;
  bool json = false;
};

int usage() {
  std::fprintf(stderr,
               "usage: probe_bbe_driver --probe-url URL --base URL [--targets N] [--duration S]\n"
               "                        [--concurrency C] [--cpu K] [--json]\n");
  return 2;
}

bool parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    long v = 0;
    if (a == "--json") {
      o.json = true;
    } else if (i + 1 >= argc) {
      return false;
    } else if (a == "--probe-url") {
      o.probe_url = argv[++i];
    } else if (a == "--base") {
      o.base = argv[++i];
    } else if (a == "--targets") {
      if (!parse_long(argv[++i], 1, kMaxTargets, o.targets)) return false;
    } else if (a == "--duration") {
      char* end = nullptr;
      o.duration_s = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(o.duration_s > 0 && o.duration_s <= kMaxDurationS)) return false;
    } else if (a == "--concurrency") {
      if (!parse_long(argv[++i], 1, kMaxConcurrency, o.concurrency)) return false;
    } else if (a == "--cpu") {
      if (!parse_long(argv[++i], 0, CPU_SETSIZE - 1, v)) return false;
      o.cpu = static_cast<int>(v);
    } else {
      return false;
    }
  }
  return loopback_url(o.probe_url) && loopback_url(o.base);
}

struct MultiCleanup {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
struct EasyCleanup {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};

// One request slot; its easy handle is reused so that its connection stays alive.
struct Slot {
  std::unique_ptr<CURL, EasyCleanup> easy;
  std::string url;
  std::string body;
  bool too_large = false;
};

std::size_t on_body(char* data, std::size_t size, std::size_t nmemb, void* userp) {
  auto* s = static_cast<Slot*>(userp);
  const std::size_t n = size * nmemb;
  if (s->body.size() + n > kMaxBody) {
    s->too_large = true;
    return 0;
  }
  s->body.append(data, n);
  return n;
}

bool says_success(const std::string& body) {
  return body.rfind("probe_success 1\n", 0) == 0 ||
         body.find("\nprobe_success 1\n") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, o)) return usage();
  if (!pin_to_cpu(o.cpu, "probe_bbe_driver")) return 1;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
  std::unique_ptr<CURLM, MultiCleanup> multi(curl_multi_init());
  if (!multi) return 1;
  curl_multi_setopt(multi.get(), CURLMOPT_MAXCONNECTS, o.concurrency + 4);

  std::vector<Slot> slots(static_cast<std::size_t>(o.concurrency));
  long next_target = 0;
  std::size_t sent = 0, success = 0, failed = 0;
  auto launch = [&](Slot& s) {
    s.url = o.probe_url + o.base + std::to_string(next_target);
    next_target = (next_target + 1) % o.targets;
    s.body.clear();
    s.too_large = false;
    curl_easy_setopt(s.easy.get(), CURLOPT_URL, s.url.c_str());
    curl_multi_add_handle(multi.get(), s.easy.get());
    ++sent;
  };
  for (auto& s : slots) {
    s.easy.reset(curl_easy_init());
    if (!s.easy) return 1;
    CURL* h = s.easy.get();
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, kRequestTimeoutMs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, static_cast<void*>(&s));
    curl_easy_setopt(h, CURLOPT_PRIVATE, static_cast<void*>(&s));
    s.body.reserve(4096);
  }

  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(o.duration_s);
  for (auto& s : slots) launch(s);
  std::string first_failure;
  int running = 1;
  while (running > 0) {
    curl_multi_perform(multi.get(), &running);
    int left = 0;
    bool relaunched = false;
    while (CURLMsg* msg = curl_multi_info_read(multi.get(), &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL* h = msg->easy_handle;
      const CURLcode rc = msg->data.result;
      Slot* s = nullptr;
      curl_easy_getinfo(h, CURLINFO_PRIVATE, reinterpret_cast<char**>(&s));
      long status = 0;
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
      curl_multi_remove_handle(multi.get(), h);
      if (rc == CURLE_OK && status == 200 && says_success(s->body)) {
        ++success;
      } else {
        ++failed;
        if (first_failure.empty())
          first_failure = rc != CURLE_OK ? curl_easy_strerror(rc)
                                         : "status " + std::to_string(status) +
                                               (s->too_large ? ", body too large" : "") +
                                               ", probe_success not 1";
      }
      if (std::chrono::steady_clock::now() < deadline) {
        launch(*s);
        relaunched = true;
      }
    }
    if (relaunched) running = 1;  // new handles: perform again before deciding we are done
    if (running > 0) curl_multi_poll(multi.get(), nullptr, 0, 1000, nullptr);
  }
  const auto t1 = std::chrono::steady_clock::now();
  getrusage(RUSAGE_SELF, &after);

  const double wall = std::chrono::duration<double>(t1 - t0).count();
  const double cpu = cpu_seconds(after) - cpu_seconds(before);
  const double done = static_cast<double>(success + failed);
  if (o.json)
    std::printf(
        "{\"requests\":%zu,\"success\":%zu,\"failed\":%zu,\"wall_s\":%.3f,\"cpu_s\":%.3f,"
        "\"requests_per_s\":%.0f,\"cpu_us_per_request\":%.1f,\"maxrss_kib\":%ld}\n",
        sent, success, failed, wall, cpu, done / wall, cpu / done * 1e6, after.ru_maxrss);
  else
    std::printf(
        "probe_bbe_driver: requests=%zu success=%zu failed=%zu wall_s=%.3f cpu_s=%.3f "
        "requests_per_s=%.0f cpu_us_per_request=%.1f maxrss_kib=%ld\n",
        sent, success, failed, wall, cpu, done / wall, cpu / done * 1e6, after.ru_maxrss);
  if (!first_failure.empty())
    std::fprintf(stderr, "probe_bbe_driver: first failure: %s\n", first_failure.c_str());
  slots.clear();  // every handle was removed from the multi: cleaned up before it, by choice
  multi.reset();
  curl_global_cleanup();
  return failed == 0 ? 0 : 1;
}
