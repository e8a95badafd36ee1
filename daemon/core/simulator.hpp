// Runs the real decision engine over a timeline of observations in simulated time: rounds at
// each group's (degraded) interval, plans that complete after a fixed simulated duration,
// operator commands at given times. Pure: used by tests, `failoverctl simulate` and `replay`.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine.hpp"
#include "health.hpp"

namespace fo::core {

struct SimGroup {
  std::string name;
  Policy policy;
  std::vector<std::string> locations;
  // Probe ids per site. A timeline row is one location verdict, i.e. probe "" (the default).
  std::vector<std::string> primary_probes{""};
  std::vector<std::string> secondary_probes{""};
  std::array<std::vector<std::string>, 4> step_names;  // per Phase, reported as action events
  Millis plan_duration{0};  // simulated time a failover/failback plan takes
  bool plans_fail = false;  // every failover/failback plan fails (for what-if of broken steps)
};

struct SimEvent {
  enum class Kind { transition, action, round };
  Kind kind = Kind::round;
  Instant t{};
  std::string group;
  // transition
  State from = State::primary_active;
  State to = State::primary_active;
  Initiator initiator = Initiator::automatic;
  // action
  Phase phase = Phase::warm;
  std::string step;
  // transition, round: the reason sentence
  std::string reason;
  // round
  SiteHealth primary, secondary;
  State state = State::primary_active;
  Site active = Site::primary;
};

struct SimSummary {
  std::string group;
  int failovers = 0;  // completed failovers
  int failbacks = 0;  // completed failbacks
  int holds = 0;      // entries into held
  std::optional<Instant> first_warm;
  Millis downtime{0};  // serving site known and below failover_below
  int alerts = 0;
};

struct SimCommand {
  Instant at;
  std::string group;
  Command command;
  bool force = false;
  std::string why;
};

class Simulator {
 public:
  // start: simulated time of the first round minus one interval (rounds at start + interval...).
  Simulator(std::vector<SimGroup> groups, Instant start);

  // Restores a group's engine state (restart scenarios). Plans in flight resume at once.
  void restore(const std::string& group, const GroupState& state);

  // Observations must be fed in non-decreasing time; the group must exist (else false).
  bool observe(const std::string& group, const Observation& o);
  void schedule(SimCommand c);  // throws std::invalid_argument for a time already passed

  // Runs every round, plan completion and command due at or before `t`.
  void run_until(Instant t);

  const std::vector<SimEvent>& events() const { return events_; }
  // Hands over the events emitted so far and forgets them (streaming callers keep memory flat).
  std::vector<SimEvent> take_events() { return std::exchange(events_, {}); }
  std::vector<SimSummary> summaries() const;
  const GroupState& state(const std::string& group) const;
  bool record_rounds = false;  // also emit a round event per evaluation

 private:
  struct G {
    SimGroup cfg;
    HealthBoard board;
    GroupState state{};
    Instant next_round{};
    std::optional<Instant> plan_done_at{};
    std::optional<PlanResult> pending{};
    SimSummary summary{};
    std::optional<Instant> mark{};  // downtime accounted up to here
    SiteHealth last_primary{}, last_secondary{};
    bool serving_down = false;
  };
  void apply(G& g, const Decision& d, Instant t);
  void round(G& g, Instant t);
  void account(G& g, Instant t);
  void update_serving(G& g);
  std::map<std::string, G> groups_;
  std::vector<SimCommand> commands_;
  std::vector<SimEvent> events_;
  Instant now_;
};

}  // namespace fo::core
