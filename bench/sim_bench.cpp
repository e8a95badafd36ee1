// Times one run_simulate (the code behind `failoverctl simulate`) and reports wall time, CPU
// time and max RSS from getrusage. Output of the simulation is formatted but only counted, so
// the figures measure the simulation and not a terminal.
//   sim_bench --config FILE --timeline FILE [--json] [--print]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <streambuf>
#include <string>

#include "ctl/sim/sim.hpp"

namespace {

// Counts bytes and lines, keeps nothing.
class CountingBuf : public std::streambuf {
 public:
  size_t bytes = 0, lines = 0;

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      ++bytes;
      if (c == '\n') ++lines;
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    bytes += static_cast<size_t>(n);
    for (std::streamsize i = 0; i < n; ++i) lines += s[i] == '\n';
    return n;
  }
};

double seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

int usage() {
  std::fprintf(stderr, "usage: sim_bench --config FILE --timeline FILE [--json] [--print]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, timeline_path;
  fo::sim::SimOptions options;
  bool print = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc)
      config_path = argv[++i];
    else if (a == "--timeline" && i + 1 < argc)
      timeline_path = argv[++i];
    else if (a == "--json")
      options.json = true;
    else if (a == "--print")
      print = true;
    else
      return usage();
  }
  if (config_path.empty() || timeline_path.empty()) return usage();

  fo::config::Config cfg;
  try {
    cfg = fo::config::load_config_file(config_path);
  } catch (const fo::config::ConfigException& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  CountingBuf counter;
  std::ostream counted(&counter);
  std::ostream& out = print ? std::cout : counted;

  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto start = std::chrono::steady_clock::now();
  const int rc = fo::sim::run_simulate(cfg, timeline_path, options, out, std::cerr);
  const auto end = std::chrono::steady_clock::now();
  getrusage(RUSAGE_SELF, &after);

  const double wall = std::chrono::duration<double>(end - start).count();
  const double user = seconds(after.ru_utime) - seconds(before.ru_utime);
  const double sys = seconds(after.ru_stime) - seconds(before.ru_stime);
  std::fprintf(stderr,
               "sim_bench: exit=%d wall_s=%.3f cpu_s=%.3f (user %.3f sys %.3f) maxrss_kib=%ld "
               "out_lines=%zu\n",
               rc, wall, user + sys, user, sys, after.ru_maxrss, counter.lines);
  return rc;
}
