// The `exec` step kind (see exec_step.hpp).
#include "actions/exec/exec_step.hpp"

#include <spdlog/spdlog.h>

namespace fo::actions {
namespace {

class ExecAttempt : public StepAttempt {
 public:
  explicit ExecAttempt(ExecRunner& exec) : exec_(exec) {}
  ~ExecAttempt() override {
    if (*id != 0) exec_.cancel(*id);
  }
  // Job id while it runs, 0 once its callback ran; shared with the callback.
  std::shared_ptr<uint64_t> id = std::make_shared<uint64_t>(0);

 private:
  ExecRunner& exec_;
};

class ExecStepPlugin : public StepPlugin {
 public:
  explicit ExecStepPlugin(ExecRunner& exec) : exec_(exec) {}

  std::unique_ptr<StepAttempt> apply(const config::Step& step, const StepContext& ctx,
                                     StepDone done) override {
    auto attempt = std::make_unique<ExecAttempt>(exec_);
    std::weak_ptr<uint64_t> id = attempt->id;
    *attempt->id =
        (exec_.start(exec_request_for(step, ctx), [done = std::move(done), id](ExecResult r) {
          if (auto p = id.lock()) *p = 0;
          StepOutcome o;
          o.status = r.ok()                                        ? StepOutcome::Status::ok
                     : r.outcome == ExecResult::Outcome::timed_out ? StepOutcome::Status::timed_out
                                                                   : StepOutcome::Status::failed;
          // A refused executable stays refused until someone fixes it.
          o.retryable = r.outcome != ExecResult::Outcome::refused;
          o.exit_code = r.exit_code;
          o.output = std::move(r.output);
          o.duration = r.duration;
          o.detail = r.summary();
          done(std::move(o));
        }));
    return attempt;
  }

 private:
  ExecRunner& exec_;
};

}  // namespace

ExecRequest exec_request_for(const config::Step& step, const StepContext& ctx) {
  ExecRequest req;
  req.argv = step.argv;
  req.timeout = step.timeout;
  for (const auto& [k, v] : step.env) {
    if (k.rfind(kReservedEnvPrefix, 0) == 0) {
      spdlog::warn("step {}: ignoring reserved environment variable {}", step.name, k);
      continue;
    }
    req.env[k] = v;
  }
  for (const auto& [k, v] : ctx.env) req.env[k] = v;
  if (!ctx.idempotency_key.empty()) req.env["FAILOVER_IDEMPOTENCY_KEY"] = ctx.idempotency_key;
  req.env["FAILOVER_STEP"] = step.name;
  if (ctx.forced) req.env.insert_or_assign("FAILOVER_FORCED", std::string(1, '1'));
  return req;
}

std::unique_ptr<StepPlugin> make_exec_step_plugin(ExecRunner& exec) {
  return std::make_unique<ExecStepPlugin>(exec);
}

}  // namespace fo::actions
