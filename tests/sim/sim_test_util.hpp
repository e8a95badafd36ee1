// Shared helpers of the simulation tests: a temporary directory, files, configs, JSON lines.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ctl/sim/sim.hpp"

namespace fo::sim::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fo-sim-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream f(file(name), std::ios::binary);
    f << text;
    return file(name);
  }

 private:
  std::filesystem::path path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

inline std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  for (const auto& l : lines_of(text)) out.push_back(nlohmann::json::parse(l));
  return out;
}

// Locations ams, fra, nyc; one group "shop" with two failover steps and no warm step.
inline const char* kSmallConfig = R"(
[[location]]
name = "ams"
kind = "local"
[[location]]
name = "fra"
kind = "local"
[[location]]
name = "nyc"
kind = "local"

[[group]]
name = "shop"
interval = "10s"
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.10/" } ]
[group.secondary]
probes = [ { kind = "http", url = "https://198.51.100.20/" } ]
[group.policy]
failover_after = 3
[[group.failover]]
kind = "exec"
name = "promote-sql"
argv = ["/bin/true"]
[[group.failover]]
kind = "exec"
name = "switch-dns"
argv = ["/bin/true"]
)";

struct RunResult {
  int rc = 0;
  std::string out, err;
};

inline RunResult simulate(const config::Config& cfg, const std::string& timeline, bool json) {
  std::ostringstream out, err;
  SimOptions o;
  o.json = json;
  RunResult r;
  r.rc = run_simulate(cfg, timeline, o, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace fo::sim::test
