// Checks in flight of one plugin, by id. A check is removed (and its sockets and timers
// released) before its callback runs, so the callback may start new checks; destroying the
// table drops every pending callback.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "probes/probe.hpp"

namespace fo::probes {

// Check must have a member `std::function<void(ProbeResult)> done`.
template <typename Check>
class CheckTable {
 public:
  uint64_t add(std::unique_ptr<Check> check) {
    const uint64_t id = next_id_++;
    checks_.emplace(id, std::move(check));
    return id;
  }
  Check* find(uint64_t id) {
    auto it = checks_.find(id);
    return it == checks_.end() ? nullptr : it->second.get();
  }
  // Ignored for unknown ids: a check finishes once.
  void finish(uint64_t id, ProbeResult result) {
    auto it = checks_.find(id);
    if (it == checks_.end()) return;
    std::unique_ptr<Check> check = std::move(it->second);
    checks_.erase(it);
    std::function<void(ProbeResult)> done = std::move(check->done);
    check.reset();
    done(std::move(result));
  }
  std::size_t size() const { return checks_.size(); }

 private:
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Check>> checks_;
};

}  // namespace fo::probes
