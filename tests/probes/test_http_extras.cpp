// HTTP probe keys added with the probe kinds: body_regex, resolve, ca_file and client
// certificates (against a real `openssl s_server` requiring a client certificate).
#include <catch2/catch.hpp>

#include <string>

#include "probes/http/http_probe.hpp"
#include "tests/probes/child_process.hpp"
#include "tests/probes/probe_rig.hpp"
#include "tests/probes/test_http_server.hpp"

using fo::config::Probe;
using fo::test::ProbeRig;
using fo::test::Route;
using fo::test::TempDir;
using fo::test::TestHttpServer;
using Ms = std::chrono::milliseconds;

namespace {

Probe http_probe(const std::string& url) {
  Probe p;
  p.name = "web";
  p.kind = "http";
  p.http.url = url;
  p.http.timeout = Ms(5000);
  return p;
}

const char* kOpenssl = "/usr/bin/openssl";

// CA, a server certificate for probe.test and a client certificate, made with the openssl CLI.
struct Pki {
  TempDir dir{"fo-pki"};
  std::string ca, server_cert, server_key, client_cert, client_key;
  Pki() {
    REQUIRE(::access(kOpenssl, X_OK) == 0);
    const std::string log = dir.file("openssl.log");
    auto run = [&](std::vector<std::string> args) {
      args.insert(args.begin(), kOpenssl);
      INFO(fo::test::read_text(log));
      REQUIRE(fo::test::run_command(args, {"PATH=/usr/bin:/bin"}, log, {},
                                    std::chrono::seconds(30)) == 0);
    };
    ca = dir.file("ca.pem");
    const std::string ca_key = dir.file("ca.key");
    run({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=fo test CA"});
    auto issue = [&](const std::string& name, const std::string& cn, const std::string& ext,
                     std::string& cert, std::string& key) {
      key = dir.file(name + ".key");
      cert = dir.file(name + ".pem");
      const std::string csr = dir.file(name + ".csr");
      const std::string extfile = dir.write(name + ".ext", ext);
      run({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", key, "-out", csr, "-subj", "/CN=" + cn});
      run({"x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
           "-days", "2", "-extfile", extfile});
    };
    issue("server", "probe.test", "subjectAltName=DNS:probe.test\n", server_cert, server_key);
    issue("client", "failoverd", "extendedKeyUsage=clientAuth\n", client_cert, client_key);
  }
};

}  // namespace

TEST_CASE("http probe: body_regex", "[probes][http]") {
  TestHttpServer server;
  server.route("/health", Route{200, "{\"status\": \"degraded\", \"lag\": 3}"});
  ProbeRig rig;
  Probe p = http_probe(server.url("/health"));
  p.http.body_regex = "\"status\": \"(ok|degraded)\"";
  CHECK(rig.run(p).ok);
  p.http.body_regex = "\"status\": \"ok\"";
  CHECK(rig.run(p).error == "http: body does not match /\"status\": \"ok\"/");
}

TEST_CASE("http probe: body_regex is linear on large bodies", "[probes][http]") {
  // Would overflow the stack with libstdc++'s default (recursive) matcher.
  const std::string body(fo::config::HttpProbe::kMaxRegexBody, 'a');
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(fo::probes::body_matches("(a|b)*c", body));
  CHECK(fo::probes::body_matches("a(a|b)*$", body));
  CHECK(fo::probes::body_matches("^aa", body));
  CHECK_FALSE(fo::probes::body_matches("^b", body));
  CHECK(fo::test::ms_since(t0) < 5000);
  CHECK_FALSE(fo::probes::body_matches("x", std::string(fo::config::HttpProbe::kMaxRegexBody, ' ') +
                                                "x"));  // beyond the searched prefix
}

TEST_CASE("http probe: resolve keeps the URL's host name", "[probes][http]") {
  TestHttpServer server;
  server.route("/health", Route{});
  ProbeRig rig;
  Probe p = http_probe("http://www.probe.test:" + std::to_string(server.port()) + "/health");
  p.http.resolve = "127.0.0.1";
  REQUIRE(rig.run(p).ok);
  REQUIRE(server.seen().size() == 1);
  CHECK_THAT(server.seen()[0].head,
             Catch::Contains("Host: www.probe.test:" + std::to_string(server.port()) + "\r\n"));
  CHECK(fo::probes::connect_to_for("::1") == "::[::1]:");
  CHECK(fo::probes::connect_to_for("192.0.2.1") == "::192.0.2.1:");
}

TEST_CASE("http probe: TLS with resolve, ca_file and a client certificate", "[probes][http]") {
  Pki pki;
  const int port = fo::test::unused_port();
  fo::test::Child server({kOpenssl, "s_server", "-accept", "127.0.0.1:" + std::to_string(port),
                          "-cert", pki.server_cert, "-key", pki.server_key, "-CAfile", pki.ca,
                          "-Verify", "1", "-www", "-quiet"},
                         {"PATH=/usr/bin:/bin"}, pki.dir.file("s_server.log"));
  ProbeRig rig;
  Probe tcp;
  tcp.kind = "tcp";
  tcp.tcp.endpoint = {"127.0.0.1", port};
  tcp.tcp.timeout = Ms(1000);
  bool listening = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!listening && std::chrono::steady_clock::now() < deadline && server.running())
    listening = rig.run(tcp).ok;
  INFO(fo::test::read_text(pki.dir.file("s_server.log")));
  REQUIRE(listening);

  Probe p = http_probe("https://probe.test:" + std::to_string(port) + "/");
  p.http.resolve = "127.0.0.1";
  p.http.ca_file = pki.ca;
  p.http.client_cert = pki.client_cert;
  p.http.client_key = pki.client_key;
  auto ok = rig.run(p);
  CHECK(ok.error.empty());
  CHECK(ok.http_status == 200);

  SECTION("without the client certificate the server refuses") {
    p.http.client_cert.clear();
    p.http.client_key.clear();
    CHECK_FALSE(rig.run(p).ok);
  }
  SECTION("a missing client certificate file") {
    p.http.client_cert = pki.dir.file("missing.pem");
    CHECK_THAT(rig.run(p).error, Catch::StartsWith("http: TLS: "));
  }
  SECTION("the certificate does not name the resolved address") {
    Probe by_ip = http_probe("https://127.0.0.1:" + std::to_string(port) + "/");
    by_ip.http.ca_file = pki.ca;
    by_ip.http.client_cert = pki.client_cert;
    by_ip.http.client_key = pki.client_key;
    CHECK_THAT(rig.run(by_ip).error, Catch::StartsWith("http: TLS: "));
  }
}
