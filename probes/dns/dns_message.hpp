// DNS probe messages with ldns: the query's wire form, and a reply matched against the query
// (ID, question) and judged against the probe's rcode and expected rdata. No I/O here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/config/config.hpp"
#include "probes/dns/ldns_util.hpp"
#include "probes/probe.hpp"

namespace fo::probes::dns {

using Query = Encoded;  // wire form, ID, or error

// A random ID, RD set (works for authoritative servers and resolvers alike), no EDNS: a
// truncated UDP reply is retried over TCP.
Query build_query(const config::DnsProbe& spec);

struct Reply {
  enum class Fit { matches, unparsable, other_query };
  Fit fit = Fit::unparsable;
  bool truncated = false;  // TC: ask again over TCP
  ProbeResult result;      // meaningful when fit == matches and !truncated
};

// Parses `data` and checks that it answers `query` (QR, ID, question name/type/class).
Reply judge_reply(const config::DnsProbe& spec, uint16_t id, const uint8_t* data, std::size_t len);

// The texts an answer RR offers to `expect` (exposed for tests): every rdata field, and all
// fields together (space separated; TXT strings concatenated). Names are lower case without
// the trailing dot.
std::vector<std::string> rdata_candidates(const std::string& rr_text_type,
                                          const std::vector<std::string>& fields);

}  // namespace fo::probes::dns
