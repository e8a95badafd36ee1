// Test helper: turn an sd-event loop until a condition holds or a deadline passes (no sleeps).
#pragma once

#include <systemd/sd-event.h>

#include <chrono>
#include <functional>

namespace fo::test {

// Returns whether `done()` became true before `limit` elapsed.
inline bool run_until(sd_event* e, const std::function<bool()>& done,
                      std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (sd_event_run(e, 20 * 1000) < 0) return false;  // wake at least every 20 ms
  }
  return true;
}

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace fo::test
