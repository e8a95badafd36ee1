// The `check` step kind (see check_step.hpp).
#include "actions/check/check_step.hpp"

namespace fo::actions {
namespace {

// Cancelling a check only silences it: the probe itself is bounded by its own timeout.
class CheckAttempt : public StepAttempt {
 public:
  ~CheckAttempt() override { *live = false; }
  std::shared_ptr<bool> live = std::make_shared<bool>(true);
};

class CheckStepPlugin : public StepPlugin {
 public:
  CheckStepPlugin(probes::ProbeDispatcher& probes, config::Location from)
      : probes_(probes), from_(std::move(from)) {}

  std::unique_ptr<StepAttempt> apply(const config::Step& step, const StepContext&,
                                     StepDone done) override {
    return run(step, std::move(done));
  }
  std::unique_ptr<StepAttempt> check(const config::Step& step, const StepContext&,
                                     StepDone done) override {
    return run(step, std::move(done));
  }

 private:
  std::unique_ptr<StepAttempt> run(const config::Step& step, StepDone done) {
    auto attempt = std::make_unique<CheckAttempt>();
    std::weak_ptr<bool> live = attempt->live;
    const std::string what = step.check.kind + " probe " + step.check.name;
    probes_.start(step.check, from_, [live, done = std::move(done), what](probes::ProbeResult r) {
      auto l = live.lock();
      if (!l || !*l) return;
      StepOutcome o = r.ok ? StepOutcome::success(what + " healthy")
                           : StepOutcome::failure(what + ": " + r.error);
      o.duration = core::Millis(static_cast<int64_t>(r.latency_ms));
      done(std::move(o));
    });
    return attempt;
  }

  probes::ProbeDispatcher& probes_;
  config::Location from_;
};

}  // namespace

std::unique_ptr<StepPlugin> make_check_step_plugin(probes::ProbeDispatcher& probes,
                                                   config::Location from) {
  return std::make_unique<CheckStepPlugin>(probes, std::move(from));
}

}  // namespace fo::actions
