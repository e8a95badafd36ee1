// The decision engine: decide(state, input, policy) -> {next state, actions, reason}.
// Pure and deterministic: no I/O, no logging, no clock reads. Time arrives in the input.
// Level-triggered: each round re-evaluates the whole picture, so a lost round is harmless.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "health.hpp"
#include "types.hpp"

namespace fo::core {

// Everything the engine remembers about one group. Persisted by the daemon after each change
// (serialize/deserialize below) so that a restart resumes mid-incident without repeating actions.
struct GroupState {
  State state = State::primary_active;
  Site active = Site::primary;             // site serving traffic, also while held
  bool secondary_warm = false;             // warm steps ran and cool has not
  Instant since{};                         // when `state` was entered
  std::optional<Instant> last_transition;  // last failover/failback (for min_dwell)
  std::deque<Instant> flap_times;          // automatic failovers/failbacks within flap_window
  int rounds_below = 0;                    // consecutive known rounds with primary < failover_below
  int secondary_rounds_below = 0;          // the same for the secondary (serving-site outage)
  bool primary_below_warm = false;         // last known primary health < warm_below (round pacing)
  std::optional<Instant>
      primary_good_since;                  // start of the current run of primary >= failback_above
  std::optional<Instant> recovered_since;  // start of the current run of primary >= warm_below
  // A plan in flight (failover or failback, also while held). plan_id is unique per group.
  std::optional<Phase> plan_phase;
  uint64_t plan_id = 0;
  uint64_t next_plan_id = 1;
  Initiator plan_initiator = Initiator::automatic;
  // Leader term of the instance that decided (multi-instance coordination carries it; 0 = single).
  uint64_t term = 0;
  std::string held_reason;  // why the group is held
};

// What one round saw.
struct RoundInput {
  Instant now;
  SiteHealth primary;
  SiteHealth secondary;
};

// Operator commands. They bypass dampening; `force` also skips the secondary health check.
enum class Command { failover, failback, hold, release };
std::string_view to_string(Command c);

struct CommandInput {
  Instant now;
  Command command;
  bool force = false;
  SiteHealth primary;  // latest round, for the non-forced safety checks
  SiteHealth secondary;
  std::string who;  // "uid=0" etc., for the reason sentence
  std::string why;  // operator's comment
};

// The executor reports a finished plan (all steps verified, or a step failed).
struct PlanResult {
  Instant now;
  Phase phase;
  uint64_t plan_id = 0;
  bool ok = false;
  std::string detail;  // e.g. "step 2 (exec switch-dns) exited 1"
};

// A request to run the steps of one phase. The daemon executes it outside the engine.
struct ActionRequest {
  Phase phase;
  uint64_t plan_id = 0;  // unique per group; warm/cool plans are fire-and-forget
  Initiator initiator = Initiator::automatic;
  Site from = Site::primary;
  Site to = Site::secondary;
  uint64_t term = 0;    // fencing token for multi-instance operation
  bool resume = false;  // re-issued after a restart: skip steps already verified
  // A reconciliation repair: the steps of the plan that made `to` serve, run again because the
  // world drifted. Like warm/cool it does not change the group's state; its result is only
  // reported.
  bool repair = false;
};

struct Transition {
  State from;
  State to;
  Initiator initiator;
};

struct Decision {
  GroupState next;
  std::vector<ActionRequest> actions;
  std::optional<Transition> transition;
  std::string reason;    // one human sentence, always set
  bool alert = false;    // the operator should look (both down, flap guard, plan failed)
  bool accepted = true;  // for commands: false if refused (reason says why)
};

Decision decide(const GroupState& state, const RoundInput& in, const Policy& policy);
Decision apply_command(const GroupState& state, const CommandInput& in, const Policy& policy);
Decision plan_finished(const GroupState& state, const PlanResult& in, const Policy& policy);
// Reconciliation observed that the world differs from the intended state (`detail` says how).
struct DriftInput {
  Instant now;
  std::string detail;
};
// Repairs the drift with the steps of the plan that made the active site serve (failover steps
// for the secondary, failback steps for the primary), counted by the flap guard; holds the group
// when one more repair would exceed it. Ignored while a plan is in flight or the group is held
// (the operator owns it then), and only reported while a switch is being decided.
Decision drift_found(const GroupState& state, const DriftInput& in, const Policy& policy);

// After a restart: re-issue the interrupted plan (resume = true), if any. Changes no state.
std::vector<ActionRequest> resume_actions(const GroupState& state);

// Interval until the next round: degraded_interval while the primary is below warm_below.
Millis round_interval(const GroupState& state, const Policy& policy);

// The transition table: allowed (from, to) pairs; checked by the daemon at start-up and by tests.
bool transition_allowed(State from, State to);

std::string serialize(const GroupState& s);
std::optional<GroupState> deserialize(std::string_view text);

}  // namespace fo::core
