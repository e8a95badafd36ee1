// Helpers for the actions tests: an owned sd-event loop driven with deadlines, temp dirs
// with scripts, and process liveness checks.
#pragma once

#include <sys/stat.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

namespace fo::actions::test {

using namespace std::chrono_literals;

struct EventDeleter {
  void operator()(sd_event* e) const { sd_event_unref(e); }
};

inline std::unique_ptr<sd_event, EventDeleter> new_loop() {
  sd_event* e = nullptr;
  if (sd_event_new(&e) < 0) throw std::runtime_error("sd_event_new failed");
  return std::unique_ptr<sd_event, EventDeleter>(e);
}

// Drives the loop until pred() holds or the deadline passes; returns pred().
inline bool run_until(sd_event* e, const std::function<bool()>& pred,
                      std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    if (sd_event_run(e, 10'000) < 0) return false;
  }
  return true;
}

// Runs the loop for a fixed span; used only to show that something does NOT happen.
inline void run_for(sd_event* e, std::chrono::milliseconds span) {
  run_until(
      e, [] { return false; }, span);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fo-actions-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

  // Writes a file and sets its mode exactly (umask does not apply).
  std::string write(const std::string& name, const std::string& body, mode_t mode = 0755) const {
    const std::string p = file(name);
    {
      std::ofstream out(p, std::ios::trunc);
      out << body;
    }
    if (chmod(p.c_str(), mode) != 0) throw std::runtime_error("chmod failed");
    return p;
  }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Waits (driving the loop) until `path` holds a pid followed by a newline.
inline pid_t wait_for_pid_file(sd_event* e, const std::string& path,
                               std::chrono::milliseconds limit) {
  pid_t pid = -1;
  run_until(
      e,
      [&] {
        std::string s = read_file(path);
        if (s.empty() || s.back() != '\n') return false;
        pid = static_cast<pid_t>(std::stol(s));
        return true;
      },
      limit);
  return pid;
}

// Alive means present and not a zombie (PID 1 here does not reap orphans).
inline bool pid_alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return false;
  std::string stat;
  std::getline(in, stat);
  auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return false;
  const char state = stat[close_paren + 2];
  return state != 'Z' && state != 'X';
}

inline bool pid_exists(pid_t pid) {
  return std::filesystem::exists("/proc/" + std::to_string(pid));
}

}  // namespace fo::actions::test
