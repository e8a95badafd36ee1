// Config of a `dns` step: point one record at the site that is to serve, through an RFC 2136
// dynamic update (TSIG-signed) or the PowerDNS HTTP API, then verify on every listed
// authoritative server. Keys and defaults: docs/steps/dns.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace fo::config {

// An authoritative server as written ("127.0.0.1:5300") and resolved to an IP literal + port.
struct DnsServer {
  std::string text;
  std::string host;  // IP literal, no brackets
  int port = 53;
};

struct DnsStep {
  std::string provider = "rfc2136";  // "rfc2136" | "powerdns"
  std::string zone;                  // absolute, lower case: "failover.test."
  std::string record;                // absolute owner name, lower case: "www.failover.test."
  std::string type = "A";            // "A" | "AAAA" | "CNAME"
  int ttl = 60;                      // seconds, 1..86400
  // What the record holds when that site serves: canonical addresses (A/AAAA) or one absolute,
  // lower-case name (CNAME), sorted and without duplicates.
  std::vector<std::string> primary;
  std::vector<std::string> secondary;
  // rfc2136
  DnsServer server;           // the zone's primary server, receives the UPDATE
  bool tsig = true;           // false only when written explicitly
  std::string tsig_key_file;  // BIND key-file format
  // powerdns
  std::string api_url;  // "http://127.0.0.1:8081" (no path)
  std::string api_key_file;
  std::string server_id = "localhost";
  // Every authoritative server that must answer the new data (default: [server] for rfc2136).
  std::vector<DnsServer> verify;
  std::chrono::milliseconds verify_interval{200};
};

}  // namespace fo::config
