// Config loader: the steps of a phase ([[group.warm]], [[group.failover]], [[group.failback]],
// [[group.cool]]). Keys common to every step are read here; each kind's own keys by its parser
// (step_<kind>.cpp).
#include <algorithm>

#include "daemon/config/config_parts.hpp"

namespace fo::config::detail {
namespace {

constexpr std::size_t kMaxEnv = 64;
constexpr std::size_t kMaxEnvValue = 4096;

const std::vector<std::string_view> kStepKinds = {"exec",     "check",   "dns",
                                                  "postgres", "systemd", "webhook"};

std::vector<std::string_view> step_keys(std::string_view kind) {
  std::vector<std::string_view> keys = {"kind",    "name",       "timeout",
                                        "retries", "on_failure", "precheck"};
  std::vector<std::string_view> more;
  if (kind == "exec")
    more = {"argv", "env"};
  else if (kind == "check")
    more = {"probe"};
  else if (kind == "dns")
    more = dns_step_keys();
  else if (kind == "postgres")
    more = postgres_step_keys();
  else if (kind == "systemd")
    more = systemd_step_keys();
  else if (kind == "webhook")
    more = webhook_step_keys();
  keys.insert(keys.end(), more.begin(), more.end());
  return keys;
}

void parse_check(const TableReader& r, const std::string& step_path, Step& step) {
  const toml::table* probe = r.subtable("probe");
  if (!probe) {
    if (!r.has("probe")) r.missing("probe");
    return;
  }
  step.check = parse_probe(r.sink(), *probe, step_path + ".probe", 0, std::nullopt);
  // An unnamed probe takes the step's name, which is what logs and history show.
  if (!probe->contains("name")) step.check.name = step.name;
}

Step parse_step(ErrorSink& sink, const toml::table& table, const std::string& step_path,
                std::size_t index) {
  Step step;
  step.pos = sink.pos(table.source());
  const std::string label = "in [[" + step_path + "]]";
  TableReader kind_reader(sink, table, label, step_path + ".", {"kind"});
  std::optional<std::string> kind = check_kind(kind_reader, kStepKinds, "step");
  if (!kind) return step;
  step.kind = *kind;
  TableReader r(sink, table, label, step_path + ".", step_keys(*kind));
  r.reject_unknown_keys();
  step.name = read_name(r, *kind, index);
  if (auto v = r.duration("timeout", core::Millis(1), std::chrono::hours(1))) step.timeout = *v;
  if (auto v = r.integer("retries", 0, 10)) step.retries = static_cast<int>(*v);
  if (auto v = r.choice("on_failure", {"abort", "continue"})) step.abort_on_failure = *v == "abort";
  if (auto v = r.boolean("precheck")) step.precheck = *v;
  if (*kind == "exec") {
    if (auto argv = parse_argv(r)) step.argv = std::move(*argv);
    if (auto v = r.string_map("env", kMaxEnv, kMaxEnvValue, env_name_problem))
      step.env = std::move(*v);
  } else if (*kind == "check") {
    parse_check(r, step_path, step);
  } else if (*kind == "dns") {
    parse_dns_step(r, step.dns);
  } else if (*kind == "postgres") {
    parse_postgres_step(r, step.postgres);
  } else if (*kind == "systemd") {
    parse_systemd_step(r, step.systemd);
  } else if (*kind == "webhook") {
    parse_webhook_step(r, step.webhook);
  }
  return step;
}

}  // namespace

std::vector<Step> parse_steps(const TableReader& group, core::Phase phase) {
  std::vector<Step> steps;
  const std::string key(core::to_string(phase));
  const toml::array* items = group.table_array(key, kMaxStepsPerPhase);
  if (!items) return steps;
  const std::string step_path = "group." + key;
  for (std::size_t i = 0; i < items->size(); ++i) {
    const toml::table& table = *items->get(i)->as_table();
    Step step = parse_step(group.sink(), table, step_path, i);
    TableReader r(group.sink(), table, "in [[" + step_path + "]]", step_path + ".", {});
    check_unique(r, steps, step, "step");
    steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace fo::config::detail
