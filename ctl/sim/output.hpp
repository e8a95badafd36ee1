// Renders simulation events and summaries as JSON lines or as readable tables, streaming: each
// event is written as soon as the simulator emits it. Internal to fo_sim.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ctl/sim/sim.hpp"

namespace fo::sim::detail {

class EventPrinter {
 public:
  // replay_base_ms: epoch ms of simulated time 0 in a replay (adds ts_ms / a UTC column).
  EventPrinter(std::ostream& out, const SimOptions& options, const std::vector<std::string>& groups,
               std::optional<int64_t> replay_base_ms);

  void event(const core::SimEvent& e);  // round events are not printed
  void summaries(const std::vector<core::SimSummary>& all);

 private:
  void table_header();
  std::ostream& out_;
  SimOptions options_;
  std::optional<int64_t> base_ms_;
  size_t group_width_ = 5;
  bool header_done_ = false;
};

// Prints and forgets the events the simulator emitted since the last call.
void print_events(core::Simulator& sim, EventPrinter& printer);

// "+HH:MM:SS" from simulated time 0, with ".mmm" when not a whole second.
std::string offset_text(core::Instant t);
// "2026-12-04 09:12:00" (UTC), with ".mmm" when not a whole second.
std::string utc_text(int64_t epoch_ms);

}  // namespace fo::sim::detail
