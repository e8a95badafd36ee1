// Probe-engine benchmark: runs rounds of N HTTP probes (distinct URLs on one local web server)
// through the daemon's real ProbeDispatcher on its own sd-event loop, and reports probes/s,
// CPU time per probe (getrusage user+sys), max RSS and the error count. See bench/README.md.
//   probe_bench --base URL [--targets N] [--duration S | --rounds R] [--interval-ms I]
//               [--concurrency C] [--timeout-ms T] [--cpu K] [--abortive-close] [--json]
// Without --interval-ms each round starts as soon as the previous one has finished (capacity).
// With it a round starts every I ms, as the daemon's rounds do (a given probe rate).
// --abortive-close: the http probe's abortive_close = true (off by default in the daemon).
#include <sched.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actions/exec/exec_runner.hpp"
#include "bench/bench_util.hpp"
#include "daemon/config/config.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "daemon/platform/event.hpp"
#include "probes/dispatcher.hpp"
#include "probes/http/http_probe.hpp"

namespace {

using fo::bench::cpu_seconds;
using fo::bench::loopback_url;
using fo::bench::parse_long;
using fo::bench::pin_to_cpu;

// Bounds on what the command line may ask for.
constexpr long kMaxTargets = 1'000'000;
constexpr double kMaxDurationS = 3600;
constexpr long kMaxRounds = 1'000'000;
constexpr long kMaxConcurrency = 65536;
constexpr std::size_t kMaxErrorKinds = 16;  // distinct error texts kept for the report

struct Options {
  std::string base;  // probe i gets base + i
  long targets = 2000;
  double duration_s = 10;
  long rounds = 0;  // > 0: run this many rounds instead of a duration
  long concurrency = static_cast<long>(fo::probes::ProbeDispatcher::kDefaultMaxConcurrent);
  long timeout_ms = 5000;
  long interval_ms = 0;  // 0: back to back
  int cpu = -1;          // >= 0: pin to this CPU (as taskset -c)
  bool json = false;
  bool abortive_close = false;
};

int usage() {
  std::fprintf(stderr,
               "usage: probe_bench --base URL [--targets N] [--duration S | --rounds R]\n"
               "                   [--interval-ms I] [--concurrency C] [--timeout-ms T] [--cpu K]\n"
               "                   [--abortive-close] [--json]\n"
               "  probe i (0 <= i < N) fetches URL followed by i, e.g. --base "
               "http://127.0.0.1:8080/t/\n");
  return 2;
}

bool parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    long v = 0;
    if (a == "--json") {
      o.json = true;
    } else if (a == "--abortive-close") {
      o.abortive_close = true;
    } else if (!has_value) {
      return false;
    } else if (a == "--base") {
      o.base = argv[++i];
    } else if (a == "--targets") {
      if (!parse_long(argv[++i], 1, kMaxTargets, o.targets)) return false;
    } else if (a == "--duration") {
      char* end = nullptr;
      o.duration_s = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(o.duration_s > 0 && o.duration_s <= kMaxDurationS)) return false;
    } else if (a == "--rounds") {
      if (!parse_long(argv[++i], 1, kMaxRounds, o.rounds)) return false;
    } else if (a == "--concurrency") {
      if (!parse_long(argv[++i], 1, kMaxConcurrency, o.concurrency)) return false;
    } else if (a == "--timeout-ms") {
      if (!parse_long(argv[++i], 1, 600'000, o.timeout_ms)) return false;
    } else if (a == "--interval-ms") {
      if (!parse_long(argv[++i], 1, 3'600'000, o.interval_ms)) return false;
    } else if (a == "--cpu") {
      if (!parse_long(argv[++i], 0, CPU_SETSIZE - 1, v)) return false;
      o.cpu = static_cast<int>(v);
    } else {
      return false;
    }
  }
  return loopback_url(o.base);
}

// Starts round after round of every probe. A round never starts before the last probe of the
// previous one has answered, the way the daemon's rounds never overlap per target; with an
// interval it also waits for the interval's end (a round that overran starts the next at once
// and counts as late).
class Runner {
 public:
  Runner(sd_event* loop, fo::probes::ProbeDispatcher& dispatcher, const Options& o)
      : loop_(loop),
        dispatcher_(dispatcher),
        options_(o),
        next_round_(loop, [this] { start_round(); }),
        stop_(loop, [this] { sd_event_exit(loop_, 0); }) {
    probes_.resize(static_cast<std::size_t>(o.targets));
    for (std::size_t i = 0; i < probes_.size(); ++i) {
      auto& p = probes_[i];
      p.name = "t" + std::to_string(i);
      p.kind = "http";
      p.http.url = o.base + std::to_string(i);
      p.http.timeout = fo::core::Millis(o.timeout_ms);
      p.http.expect_status = {{200, 200}};
      p.http.abortive_close = o.abortive_close;
    }
    from_.name = "bench";
  }

  void start() {
    t0_ = std::chrono::steady_clock::now();
    start_round();
  }

  std::size_t done = 0;
  std::size_t errors = 0;
  long rounds = 0;
  long late_rounds = 0;
  std::map<std::string, std::size_t> error_kinds;
  double latency_max_ms = 0;
  double latency_sum_ms = 0;

 private:
  void start_round() {
    ++rounds;
    round_start_ = std::chrono::steady_clock::now();
    left_in_round_ = probes_.size();
    for (const auto& p : probes_)
      dispatcher_.start(p, from_, [this](fo::probes::ProbeResult r) { on_result(r); });
  }

  void on_result(const fo::probes::ProbeResult& r) {
    ++done;
    latency_sum_ms += r.latency_ms;
    if (r.latency_ms > latency_max_ms) latency_max_ms = r.latency_ms;
    if (!r.ok) {
      ++errors;
      if (error_kinds.size() < kMaxErrorKinds || error_kinds.count(r.error)) ++error_kinds[r.error];
    }
    if (--left_in_round_ > 0) return;
    using Ms = std::chrono::duration<double, std::milli>;
    const auto now = std::chrono::steady_clock::now();
    const auto interval = fo::core::Millis(options_.interval_ms);
    // With an interval, time counts in whole intervals: the figures cover the idle tail too.
    const auto end_of_round = options_.interval_ms > 0 ? round_start_ + interval : now;
    const bool more =
        options_.rounds > 0
            ? rounds < options_.rounds
            : std::chrono::duration<double>(end_of_round - t0_).count() < options_.duration_s;
    const double wait_ms = Ms(end_of_round - now).count();
    if (more && wait_ms <= 0) {
      if (options_.interval_ms > 0) ++late_rounds;
      start_round();
    } else if (more) {
      next_round_.arm_in(fo::core::Millis(static_cast<long>(wait_ms)));
    } else if (wait_ms > 0) {
      stop_.arm_in(fo::core::Millis(static_cast<long>(wait_ms)));
    } else {
      sd_event_exit(loop_, 0);
    }
  }

  sd_event* loop_;
  fo::probes::ProbeDispatcher& dispatcher_;
  const Options& options_;
  std::vector<fo::config::Probe> probes_;
  fo::config::Location from_;
  std::size_t left_in_round_ = 0;
  std::chrono::steady_clock::time_point t0_;
  std::chrono::steady_clock::time_point round_start_;
  fo::platform::Timer next_round_;
  fo::platform::Timer stop_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, o)) return usage();
  if (!pin_to_cpu(o.cpu, "probe_bench")) return 1;
  try {
    auto loop = fo::platform::make_event();
    fo::platform::CurlMulti curl(loop.get());
    fo::actions::ExecRunner exec(loop.get());
    fo::probes::ProbeDispatcher dispatcher(loop.get(), curl, exec);
    dispatcher.set_max_concurrent(static_cast<std::size_t>(o.concurrency));
    Runner runner(loop.get(), dispatcher, o);

    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    const auto t0 = std::chrono::steady_clock::now();
    runner.start();
    const int rc = sd_event_loop(loop.get());
    const auto t1 = std::chrono::steady_clock::now();
    getrusage(RUSAGE_SELF, &after);
    if (rc < 0) {
      std::fprintf(stderr, "probe_bench: sd_event_loop failed: %d\n", rc);
      return 1;
    }

    const double wall = std::chrono::duration<double>(t1 - t0).count();
    const double cpu = cpu_seconds(after) - cpu_seconds(before);
    const double n = static_cast<double>(runner.done);
    const double rate = n / wall;
    const double cpu_us = cpu / n * 1e6;
    const double mean_ms = runner.latency_sum_ms / n;
    if (o.json) {
      std::printf(
          "{\"targets\":%ld,\"concurrency\":%ld,\"interval_ms\":%ld,\"rounds\":%ld,"
          "\"late_rounds\":%ld,\"probes\":%zu,\"errors\":%zu,"
          "\"wall_s\":%.3f,\"cpu_s\":%.3f,\"probes_per_s\":%.0f,\"cpu_us_per_probe\":%.1f,"
          "\"maxrss_kib\":%ld,\"latency_mean_ms\":%.2f,\"latency_max_ms\":%.1f}\n",
          o.targets, o.concurrency, o.interval_ms, runner.rounds, runner.late_rounds, runner.done,
          runner.errors, wall, cpu, rate, cpu_us, after.ru_maxrss, mean_ms, runner.latency_max_ms);
    } else {
      std::printf(
          "probe_bench: targets=%ld concurrency=%ld interval_ms=%ld rounds=%ld late_rounds=%ld "
          "probes=%zu errors=%zu "
          "wall_s=%.3f cpu_s=%.3f probes_per_s=%.0f cpu_us_per_probe=%.1f maxrss_kib=%ld "
          "latency_mean_ms=%.2f latency_max_ms=%.1f\n",
          o.targets, o.concurrency, o.interval_ms, runner.rounds, runner.late_rounds, runner.done,
          runner.errors, wall, cpu, rate, cpu_us, after.ru_maxrss, mean_ms, runner.latency_max_ms);
    }
    for (const auto& [text, count] : runner.error_kinds)
      std::fprintf(stderr, "probe_bench: %zu x %s\n", count, text.c_str());
    return runner.errors == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "probe_bench: %s\n", e.what());
    return 1;
  }
}
