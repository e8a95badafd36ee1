// Small helpers shared by the probe benchmark drivers (probe_bench, probe_bbe_driver):
// argument parsing, pinning to a CPU, CPU time from getrusage, the loopback-only URL check.
#pragma once

#include <sched.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace fo::bench {

// A whole decimal number in [lo, hi].
inline bool parse_long(const char* text, long lo, long hi, long& out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

// Benchmarks send traffic to loopback only.
inline bool loopback_url(const std::string& url) {
  return url.rfind("http://127.0.0.1:", 0) == 0 || url.rfind("http://[::1]:", 0) == 0;
}

// Like `taskset -c cpu`; a negative cpu leaves the affinity alone. Prints why on failure.
inline bool pin_to_cpu(int cpu, const char* program) {
  if (cpu < 0) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) == 0) return true;
  std::string what = std::string(program) + ": sched_setaffinity";
  std::perror(what.c_str());
  return false;
}

// User + system CPU time in seconds.
inline double cpu_seconds(const rusage& ru) {
  auto s = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

}  // namespace fo::bench
