// The `dns` step kind (see dns_step.hpp): one attempt = observe, at most one update, verify.
#include "actions/dns/dns_step.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>

#include "actions/dns/dns_wire.hpp"
#include "actions/dns/http_call.hpp"
#include "actions/dns/tsig_key.hpp"
#include "actions/dns/udp_exchange.hpp"
#include "actions/secret_file.hpp"
#include "daemon/platform/event.hpp"
#include "probes/net.hpp"

namespace fo::actions {
namespace {

using core::Millis;
using namespace dns;

// One query never waits longer than this, so a silent server costs one slot of a verify round,
// not the whole step.
constexpr Millis kMaxQueryWait{2000};
constexpr Millis kMaxUpdateWait{5000};
constexpr Millis kMaxHttpWait{10000};
constexpr std::size_t kMaxDetail = 1000;
constexpr std::size_t kMaxErrorExcerpt = 200;

std::string ms(Millis d) {
  return std::to_string(d.count()) + " ms";
}

// What the step needs from its secret file: the TSIG key, or the API key.
struct Secrets {
  std::optional<TsigKey> tsig;
  std::string api_key;
  std::string error;
  std::string secret() const { return tsig ? tsig->secret : api_key; }
};

Secrets load_secrets(const config::DnsStep& spec) {
  Secrets s;
  if (spec.provider == "powerdns") {
    SecretRead r = read_secret_file(spec.api_key_file);
    if (!r.ok) {
      s.error = r.error;
      return s;
    }
    const bool clean = std::all_of(r.value.begin(), r.value.end(), [](char c) {
      return static_cast<unsigned char>(c) > 0x20 && c != 0x7f;
    });
    // The key goes into an HTTP header: a line break would inject further headers.
    if (!clean) s.error = "API key file " + spec.api_key_file + " must hold one token (no spaces)";
    s.api_key = std::move(r.value);
    return s;
  }
  if (!spec.tsig) return s;
  SecretRead r = read_secret_file(spec.tsig_key_file);
  if (!r.ok) {
    s.error = r.error;
    return s;
  }
  TsigKeyParse p = parse_tsig_key(r.value);
  if (!p.ok) {
    s.error = "TSIG key file " + spec.tsig_key_file + ": " + p.error;
    return s;
  }
  s.tsig = std::move(p.key);
  return s;
}

// What one verify server answered.
struct Seen {
  std::string server;
  bool answered = false;
  bool matches = false;
  std::vector<std::string> values;
  std::string rcode;
  std::string error;
};

std::string describe(const Seen& s) {
  if (!s.answered) return s.server + ": " + s.error;
  std::string text = s.server + " answers " + join_values(s.values);
  if (s.values.empty() && s.rcode != "NOERROR") text += " (" + s.rcode + ")";
  return text;
}

std::string describe(const std::vector<Seen>& seen) {
  std::string out;
  for (const Seen& s : seen) out += (out.empty() ? "" : "; ") + describe(s);
  return out.empty() ? "no server asked yet" : out;
}

std::size_t count_matching(const std::vector<Seen>& seen) {
  return static_cast<std::size_t>(
      std::count_if(seen.begin(), seen.end(), [](const Seen& s) { return s.matches; }));
}

// One round of queries to every verify server at once.
class Observer {
 public:
  using Done = std::function<void(std::vector<Seen>)>;
  Observer(sd_event* event, const config::DnsStep& spec, const std::vector<std::string>& want,
           Millis wait, Done done)
      : want_(want), done_(std::move(done)), empty_(event, [this] { complete(); }) {
    seen_.resize(spec.verify.size());
    pending_ = spec.verify.size();
    if (pending_ == 0) {
      empty_.arm_in(Millis(0));
      return;
    }
    for (std::size_t i = 0; i < spec.verify.size(); ++i) {
      seen_[i].server = spec.verify[i].text;
      requests_.push_back(build_query(spec.record, spec.type, nullptr));
    }
    for (std::size_t i = 0; i < spec.verify.size(); ++i)
      exchanges_.push_back(std::make_unique<UdpExchange>(
          event, spec.verify[i], requests_[i].wire, requests_[i].id, wait,
          [this, i](Exchanged r) { on_reply(i, std::move(r)); }));
  }

 private:
  void on_reply(std::size_t i, Exchanged r) {
    Seen& s = seen_[i];
    if (!r.ok) {
      s.error = r.error;
    } else {
      Reply reply = read_reply(requests_[i], r.reply.data(), r.reply.size(), nullptr);
      if (!reply.parsed)
        s.error = reply.error;
      else if (reply.truncated)
        s.error = "truncated reply";
      else if (reply.rcode != "NOERROR" && reply.rcode != "NXDOMAIN")
        s.error = "answers " + reply.rcode;
      else if (!reply.authoritative)
        s.error = "is not authoritative for the record (no AA flag)";
      if (s.error.empty()) {
        s.answered = true;
        s.rcode = reply.rcode;
        s.values = std::move(reply.values);
        s.matches = s.values == want_;
      }
    }
    if (--pending_ == 0) complete();
  }
  void complete() {
    Done done = std::move(done_);
    done_ = nullptr;
    if (done) done(std::move(seen_));  // may destroy *this
  }

  std::vector<std::string> want_;
  Done done_;
  platform::Timer empty_;
  std::vector<Seen> seen_;
  std::vector<Request> requests_;
  std::vector<std::unique_ptr<UdpExchange>> exchanges_;
  std::size_t pending_ = 0;
};

class DnsAttempt final : public StepAttempt {
 public:
  enum class Mode { apply, check, observe };

  DnsAttempt(sd_event* event, platform::CurlMulti& curl, const config::Step& step,
             const StepContext& ctx, Mode mode, StepDone done)
      : event_(event),
        curl_(curl),
        spec_(step.dns),
        timeout_(step.timeout),
        mode_(mode),
        done_(std::move(done)),
        start_(platform::mono_now(event)),
        soon_(event, [this] { finish(std::move(*pending_outcome_)); }),
        deadline_(event, [this] { on_deadline(); }),
        poll_(event, [this] { observe_round(); }) {
    want_ = ctx.target == core::Site::primary ? spec_.primary : spec_.secondary;
    if (mode_ != Mode::observe) {
      secrets_ = load_secrets(spec_);
      if (!secrets_.error.empty()) {
        finish_soon(StepOutcome::failure(secrets_.error, false));
        return;
      }
    }
    deadline_.arm_in(timeout_);
    if (mode_ == Mode::check)
      start_check();
    else
      observe_round();
  }

 private:
  enum class Stage { observing, updating, verifying };

  Millis remaining() const {
    const Millis left = start_ + timeout_ - platform::mono_now(event_);
    return std::max(Millis(1), left);
  }
  Millis wait(Millis cap) const { return std::min(cap, remaining()); }
  std::string record_text() const { return spec_.record + " " + spec_.type; }
  std::string server_text() const {
    return spec_.provider == "powerdns" ? spec_.api_url : spec_.server.text;
  }

  // --- observe / verify ---------------------------------------------------------------------

  void observe_round() {
    observer_ = std::make_unique<Observer>(event_, spec_, want_, wait(kMaxQueryWait),
                                           [this](std::vector<Seen> s) { on_seen(std::move(s)); });
  }

  void on_seen(std::vector<Seen> seen) {
    last_seen_ = std::move(seen);
    const std::size_t ok = count_matching(last_seen_);
    const std::size_t all = last_seen_.size();
    const bool in_place = all > 0 && ok == all;
    const std::string summary =
        std::to_string(ok) + "/" + std::to_string(all) + " servers answer " + join_values(want_);
    if (mode_ == Mode::observe) {
      if (in_place) return finish(StepOutcome::success(summary + " for " + record_text()));
      return finish(StepOutcome::failure("drift: " + record_text() + ": " + describe(last_seen_)));
    }
    if (stage_ == Stage::observing) {
      if (in_place)
        return finish(
            StepOutcome::success("already in place: " + summary + " for " + record_text(), true));
      return send_update();
    }
    if (in_place)
      return finish(StepOutcome::success("updated " + record_text() + " via " + server_text() +
                                         "; " + summary));
    poll_.arm_in(std::min(spec_.verify_interval, remaining()));
  }

  // --- update -------------------------------------------------------------------------------

  void send_update() {
    stage_ = Stage::updating;
    if (spec_.provider == "powerdns") return send_patch();
    const TsigKey* key = secrets_.tsig ? &*secrets_.tsig : nullptr;
    request_ = build_update(spec_, want_, key);
    if (!request_.error.empty()) return finish(StepOutcome::failure(request_.error, false));
    exchange_ = std::make_unique<UdpExchange>(
        event_, spec_.server, request_.wire, request_.id, wait(kMaxUpdateWait),
        [this](Exchanged r) { on_update_reply(std::move(r)); });
  }

  // A TSIG or rcode failure that another attempt cannot fix; "" when there is none.
  std::string refusal(const Reply& reply, const std::string& what) const {
    const std::string server = spec_.server.text;
    if (!reply.tsig_error.empty())
      return "TSIG key '" + (secrets_.tsig ? secrets_.tsig->name : std::string("?")) +
             "' rejected by " + server + " (" + reply.tsig_error + ")";
    if (reply.rcode == "REFUSED")
      return server + " refused the " + what + " for zone " + spec_.zone +
             " (REFUSED): not allowed for this key or client";
    if (reply.rcode == "NOTAUTH")
      return server + " is not authoritative for zone " + spec_.zone + " (NOTAUTH)";
    if (reply.rcode == "NOTZONE")
      return spec_.record + " is not in zone " + spec_.zone + " at " + server + " (NOTZONE)";
    return "";
  }

  void on_update_reply(Exchanged r) {
    const std::string server = spec_.server.text;
    if (!r.ok) return finish(StepOutcome::failure("UPDATE to " + server + " failed: " + r.error));
    const TsigKey* key = secrets_.tsig ? &*secrets_.tsig : nullptr;
    Reply reply = read_reply(request_, r.reply.data(), r.reply.size(), key);
    if (!reply.parsed)
      return finish(StepOutcome::failure("UPDATE to " + server + ": " + reply.error));
    if (std::string why = refusal(reply, "UPDATE"); !why.empty())
      return finish(StepOutcome::failure(why, false));
    if (reply.rcode == "SERVFAIL")  // e.g. right after a restart, before the zone is loaded
      return finish(StepOutcome::failure(server + " answered the UPDATE with SERVFAIL"));
    if (reply.rcode != "NOERROR")
      return finish(
          StepOutcome::failure(server + " answered the UPDATE with " + reply.rcode, false));
    // Retried: a forged or damaged reply is the likely cause, and a retry observes first.
    if (key && !reply.tsig_verified)
      return finish(StepOutcome::failure(
          "the reply of " + server +
          " to the UPDATE carries no valid TSIG signature: " + reply.tsig_problem));
    after_update();
  }

  void after_update() {
    exchange_.reset();
    stage_ = Stage::verifying;
    observe_round();
  }

  std::string zone_url() const {
    return spec_.api_url + "/api/v1/servers/" + spec_.server_id + "/zones/" + spec_.zone;
  }

  void send_patch() {
    nlohmann::json records = nlohmann::json::array();
    for (const std::string& v : want_) records.push_back({{"content", v}, {"disabled", false}});
    nlohmann::json body = {{"rrsets",
                            {{{"name", spec_.record},
                              {"type", spec_.type},
                              {"ttl", spec_.ttl},
                              {"changetype", "REPLACE"},
                              {"records", records}}}}};
    http_ = std::make_unique<HttpCall>(curl_, "PATCH", zone_url(), secrets_.api_key, body.dump(),
                                       wait(kMaxHttpWait),
                                       [this](HttpResult r) { on_api_reply(std::move(r), true); });
  }

  // PowerDNS reports errors as {"error": "..."}.
  static std::string api_error(const std::string& body) {
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_string())
      return probes::shorten(j["error"].get<std::string>(), kMaxErrorExcerpt);
    return "";
  }

  void on_api_reply(HttpResult r, bool patch) {
    const std::string what = patch ? "PATCH of " + record_text() : "GET of zone " + spec_.zone;
    if (!r.transport_ok)
      return finish(StepOutcome::failure("PowerDNS API at " + spec_.api_url + ": " + what +
                                         " failed: " + probes::shorten(r.error, kMaxErrorExcerpt)));
    const std::string code = "HTTP " + std::to_string(r.status);
    std::string excerpt = api_error(r.body);
    if (!excerpt.empty()) excerpt = ": " + excerpt;
    if (r.status == 401 || r.status == 403)
      return finish(
          StepOutcome::failure("API key rejected by " + spec_.api_url + " (" + code + ")", false));
    if (r.status == 404)
      return finish(StepOutcome::failure("PowerDNS at " + spec_.api_url + " has no zone " +
                                             spec_.zone + " on server '" + spec_.server_id + "' (" +
                                             code + ")" + excerpt,
                                         false));
    if (r.status >= 400 && r.status < 500)
      return finish(StepOutcome::failure(
          "PowerDNS at " + spec_.api_url + " refused the " + what + " (" + code + ")" + excerpt,
          false));
    if (r.status < 200 || r.status >= 300)
      return finish(StepOutcome::failure("PowerDNS at " + spec_.api_url + ": " + what + " got " +
                                         code + excerpt));
    if (!patch)
      return finish(StepOutcome::success("PowerDNS API at " + spec_.api_url + " serves zone " +
                                         spec_.zone + " and accepts the API key"));
    http_.reset();
    after_update();
  }

  // --- check --------------------------------------------------------------------------------

  void start_check() {
    if (spec_.provider == "powerdns") {
      http_ = std::make_unique<HttpCall>(
          curl_, "GET", zone_url() + "?rrsets=false", secrets_.api_key, "", wait(kMaxHttpWait),
          [this](HttpResult r) { on_api_reply(std::move(r), false); });
      return;
    }
    const TsigKey* key = secrets_.tsig ? &*secrets_.tsig : nullptr;
    request_ = build_query(spec_.zone, "SOA", key);
    if (!request_.error.empty()) return finish_soon(StepOutcome::failure(request_.error, false));
    exchange_ = std::make_unique<UdpExchange>(
        event_, spec_.server, request_.wire, request_.id, wait(kMaxQueryWait),
        [this](Exchanged r) { on_check_reply(std::move(r)); });
  }

  void on_check_reply(Exchanged r) {
    const std::string server = spec_.server.text;
    if (!r.ok) return finish(StepOutcome::failure("SOA query to " + server + ": " + r.error));
    const TsigKey* key = secrets_.tsig ? &*secrets_.tsig : nullptr;
    Reply reply = read_reply(request_, r.reply.data(), r.reply.size(), key);
    if (!reply.parsed)
      return finish(StepOutcome::failure("SOA query to " + server + ": " + reply.error));
    if (std::string why = refusal(reply, "SOA query"); !why.empty())
      return finish(StepOutcome::failure(why, false));
    if (reply.rcode == "SERVFAIL")
      return finish(StepOutcome::failure(server + " answered the SOA query with SERVFAIL"));
    if (reply.rcode != "NOERROR" || !reply.authoritative || reply.soa_serial == 0)
      return finish(StepOutcome::failure(
          server + " does not serve zone " + spec_.zone + " (" + reply.rcode + ")", false));
    if (key && !reply.tsig_verified)
      return finish(StepOutcome::failure("the reply of " + server +
                                             " carries no valid TSIG signature for key '" +
                                             key->name + "': " + reply.tsig_problem,
                                         false));
    std::string detail = server + " serves zone " + spec_.zone + " (serial " +
                         std::to_string(reply.soa_serial) + ")";
    if (key) detail += " and accepts TSIG key '" + key->name + "'";
    finish(StepOutcome::success(detail));
  }

  // --- end ----------------------------------------------------------------------------------

  void on_deadline() {
    StepOutcome o;
    o.status = StepOutcome::Status::timed_out;
    if (mode_ == Mode::check)
      o.detail = "no answer from " + server_text() + " within " + ms(timeout_);
    else if (stage_ == Stage::updating)
      o.detail = "no reply from " + server_text() + " to the update within " + ms(timeout_);
    else
      o.detail = std::string(stage_ == Stage::verifying ? "updated, but " : "") +
                 "not all servers answer " + join_values(want_) + " within " + ms(timeout_) + ": " +
                 describe(last_seen_);
    finish(std::move(o));
  }

  void finish_soon(StepOutcome o) {
    pending_outcome_ = std::move(o);
    soon_.arm_in(Millis(0));
  }

  // The one exit: cancels everything in flight, removes any trace of the secret, reports.
  void finish(StepOutcome o) {
    if (!done_) return;
    observer_.reset();
    exchange_.reset();
    http_.reset();
    poll_.disarm();
    deadline_.disarm();
    if (!last_seen_.empty() && mode_ != Mode::check) o.output = describe(last_seen_);
    const std::string secret = secrets_.secret();
    for (std::string* text : {&o.detail, &o.output}) {
      if (!secret.empty())
        for (std::size_t at = text->find(secret); at != std::string::npos;
             at = text->find(secret, at))
          text->replace(at, secret.size(), "[secret]");
      *text = probes::shorten(*text, kMaxDetail);
    }
    o.duration = platform::mono_now(event_) - start_;
    StepDone done = std::move(done_);
    done_ = nullptr;
    done(std::move(o));  // may destroy *this
  }

  sd_event* event_;
  platform::CurlMulti& curl_;
  config::DnsStep spec_;
  Millis timeout_;
  Mode mode_;
  StepDone done_;
  Millis start_;
  std::vector<std::string> want_;
  Secrets secrets_;
  Stage stage_ = Stage::observing;
  std::vector<Seen> last_seen_;
  Request request_;
  std::optional<StepOutcome> pending_outcome_;
  std::unique_ptr<Observer> observer_;
  std::unique_ptr<UdpExchange> exchange_;
  std::unique_ptr<HttpCall> http_;
  platform::Timer soon_;
  platform::Timer deadline_;
  platform::Timer poll_;
};

class DnsStepPlugin final : public StepPlugin {
 public:
  DnsStepPlugin(sd_event* event, platform::CurlMulti& curl) : event_(event), curl_(curl) {}

  std::unique_ptr<StepAttempt> apply(const config::Step& step, const StepContext& ctx,
                                     StepDone done) override {
    return std::make_unique<DnsAttempt>(event_, curl_, step, ctx, DnsAttempt::Mode::apply,
                                        std::move(done));
  }
  std::unique_ptr<StepAttempt> check(const config::Step& step, const StepContext& ctx,
                                     StepDone done) override {
    return std::make_unique<DnsAttempt>(event_, curl_, step, ctx, DnsAttempt::Mode::check,
                                        std::move(done));
  }
  std::unique_ptr<StepAttempt> observe(const config::Step& step, const StepContext& ctx,
                                       StepDone done) override {
    return std::make_unique<DnsAttempt>(event_, curl_, step, ctx, DnsAttempt::Mode::observe,
                                        std::move(done));
  }

 private:
  sd_event* event_;
  platform::CurlMulti& curl_;
};

}  // namespace

std::unique_ptr<StepPlugin> make_dns_step_plugin(sd_event* event, platform::CurlMulti& curl) {
  return std::make_unique<DnsStepPlugin>(event, curl);
}

}  // namespace fo::actions
