// DNS messages of the dns step, built and read with ldns (no I/O): the RFC 2136 UPDATE that
// replaces one RRset, the queries that read it back, TSIG signing of requests and verification
// of replies. Replies are untrusted input: anything unexpected becomes an error text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actions/dns/tsig_key.hpp"
#include "daemon/config/step_dns.hpp"

namespace fo::actions::dns {

struct Request {
  std::vector<uint8_t> wire;  // empty when error is set
  uint16_t id = 0;
  std::vector<uint8_t> mac;  // the request's raw TSIG MAC (a signed reply's MAC covers it)
  std::string qname;         // the question (zone for an UPDATE), absolute
  std::string qtype;         // "A" | "AAAA" | "CNAME" | "SOA"
  bool signed_with_tsig = false;
  std::string error;
};

// Deletes the step's RRset and adds `values` with the step's TTL; signed when `key` is set.
Request build_update(const config::DnsStep& step, const std::vector<std::string>& values,
                     const TsigKey* key);
// A non-recursive query, signed when `key` is set.
Request build_query(const std::string& name, const std::string& type, const TsigKey* key);

struct Reply {
  bool parsed = false;
  std::string rcode;  // "NOERROR", "NOTAUTH", ...
  bool authoritative = false;
  bool truncated = false;
  bool has_tsig = false;
  std::string tsig_error;  // the TSIG error field: "" (none), "BADSIG", "BADKEY", "BADTIME"
  bool tsig_verified = false;
  std::string tsig_problem;  // why a reply to a signed request failed verification
  // Answer RRs of the question's name and type: canonical addresses, or lower-case absolute
  // names; sorted.
  std::vector<std::string> values;
  std::uint32_t soa_serial = 0;  // SOA queries
  std::string error;             // unparsable, or does not answer the request
};

// `data` must already be known to carry the request's ID (the exchange filters on it).
Reply read_reply(const Request& request, const uint8_t* data, std::size_t len, const TsigKey* key);

// "198.51.100.20, 198.51.100.21" or "nothing".
std::string join_values(const std::vector<std::string>& values);

}  // namespace fo::actions::dns
