// `failoverd --agent`: the probe agent process. Wiring only: config, secrets, the event loop,
// the probe plumbing (CurlMulti, ExecRunner, ProbeDispatcher) and the AgentServer.
#include "daemon/agent/agent_main.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "actions/exec/exec_runner.hpp"
#include "actions/secret_file.hpp"
#include "daemon/agent/agent_config.hpp"
#include "daemon/agent/agent_server.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "daemon/platform/journal.hpp"
#include "daemon/platform/notify.hpp"
#include "daemon/platform/signals.hpp"
#include "probes/dispatcher.hpp"

namespace fo::agent {
namespace {

constexpr std::size_t kMaxPemBytes = 1024 * 1024;

// A certificate is public: any permissions, but a size cap and a regular file.
std::string read_public_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  std::string out;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, std::size_t(n));
    if (out.size() > kMaxPemBytes) break;
  }
  ::close(fd);
  if (out.size() > kMaxPemBytes) throw std::runtime_error(path + " is larger than 1 MiB");
  return out;
}

std::string secret(const std::string& path, const char* what) {
  const actions::SecretRead s = actions::read_secret_file(path);
  if (!s.ok) throw std::runtime_error(std::string(what) + ": " + s.error);
  return s.value;
}

}  // namespace

int check_agent_config(const std::string& path) {
  try {
    const AgentConfig cfg = load_agent_config_file(path);
    std::printf("%s: OK (agent listening on %s%s, exec %s)\n", path.c_str(), cfg.listen.c_str(),
                cfg.tls_cert.empty() ? "" : " with TLS",
                cfg.allow_exec ? "allowed" : "not allowed");
    return 0;
  } catch (const config::ConfigException& e) {
    for (const auto& err : e.errors()) std::fprintf(stderr, "%s\n", err.to_string().c_str());
    return 1;
  }
}

int run_agent(const std::string& config_path, const std::string& log_level) {
  platform::block_signals_for_loop();
  std::signal(SIGPIPE, SIG_IGN);
  platform::setup_logging(log_level.empty() ? "info" : log_level);
  AgentConfig cfg;
  try {
    cfg = load_agent_config_file(config_path);
  } catch (const config::ConfigException& e) {
    for (const auto& err : e.errors()) spdlog::critical("{}", err.to_string());
    return 1;
  }
  if (log_level.empty()) platform::setup_logging(cfg.log_level);
  try {
    AgentServerOptions o;
    o.listen = cfg.listen;
    o.token = secret(cfg.token_file, "token_file");
    o.allow_exec = cfg.allow_exec;
    o.max_request_bytes = cfg.max_request_bytes;
    o.max_probes_per_request = cfg.max_probes_per_request;
    o.max_concurrent_requests = cfg.max_concurrent_requests;
    o.max_requests_per_second = cfg.max_requests_per_second;
    if (!cfg.tls_cert.empty()) {
      o.tls_cert_pem = read_public_file(cfg.tls_cert);
      o.tls_key_pem = secret(cfg.tls_key, "tls_key");
    }
    o.location = cfg.location;
    platform::EventPtr event = platform::make_event();
    platform::CurlMulti curl(event.get());
    actions::ExecRunner exec(event.get());
    probes::ProbeDispatcher dispatcher(event.get(), curl, exec);
    dispatcher.set_max_concurrent(cfg.max_concurrent_probes);
    AgentServer server(event.get(), dispatcher, o);
    for (int sig : {SIGTERM, SIGINT}) {
      sd_event_source* s = nullptr;
      // No handler: the signal ends the loop. The source lives as long as the loop.
      if (int r = sd_event_add_signal(event.get(), &s, sig, nullptr, nullptr); r < 0)
        throw std::runtime_error("cannot watch signal " + std::to_string(sig) + ": " +
                                 std::strerror(-r));
      sd_event_source_set_floating(s, 1);
      sd_event_source_unref(s);
    }
    spdlog::info("failoverd agent {} listening on {} (port {}){}, location {}, exec {}",
                 FAILOVERD_VERSION, cfg.listen, server.port(),
                 o.tls_cert_pem.empty() ? "" : " with TLS", cfg.location.name,
                 cfg.allow_exec ? "allowed" : "refused");
    platform::notify_ready("agent listening on " + cfg.listen);
    const int r = sd_event_loop(event.get());
    platform::notify_stopping();
    spdlog::info("agent stopping");
    if (r < 0) {
      spdlog::critical("event loop failed: {}", std::strerror(-r));
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    spdlog::critical("agent: cannot start: {}", e.what());
    return 1;
  }
}

}  // namespace fo::agent
