// DNS messages on ldns, shared by the dns probe (probes/dns) and the dns step (actions/dns):
// owning handles, query encoding, and reading replies (rcode, question, answer rdata). No I/O.
// Implemented in dns_message.cpp, so that both get it with fo_probes.
#pragma once

// First: without it, ldns/common.h defines the macros `bool` and `false` in C++ too, which
// breaks standard headers included after it (<optional>'s operator<=>).
#include <stdbool.h>

#include <ldns/ldns.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace fo::probes::dns {

// The largest DNS message (its length is 16 bits on TCP).
inline constexpr std::size_t kMaxDnsMessage = 65535;
// Datagrams that do not answer our request (stale or spoofed) are skipped, but not forever.
inline constexpr int kMaxIgnoredReplies = 32;

struct PktFree {
  void operator()(ldns_pkt* p) const { ldns_pkt_free(p); }
};
using PktPtr = std::unique_ptr<ldns_pkt, PktFree>;

struct RdfFree {
  void operator()(ldns_rdf* r) const { ldns_rdf_deep_free(r); }
};
using RdfPtr = std::unique_ptr<ldns_rdf, RdfFree>;

struct RrFree {
  void operator()(ldns_rr* r) const { ldns_rr_free(r); }
};
using RrPtr = std::unique_ptr<ldns_rr, RrFree>;

struct RrListFree {
  void operator()(ldns_rr_list* l) const { ldns_rr_list_deep_free(l); }
};
using RrListPtr = std::unique_ptr<ldns_rr_list, RrListFree>;

// Buffers ldns allocates with malloc (wire forms, texts).
struct CFree {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
using MallocPtr = std::unique_ptr<T, CFree>;

std::string lower_ascii(std::string s);

// An rdata field as text: ldns' presentation form, except a TXT character-string, which is
// returned raw (no quotes or escapes).
std::string rdf_text(const ldns_rdf* rdf);

// "NOERROR", "NXDOMAIN", ..., or "rcode 12".
std::string rcode_name(ldns_pkt_rcode rcode);

struct Encoded {
  std::vector<uint8_t> wire;  // empty when error is set
  uint16_t id = 0;
  std::string error;
};

// Gives `pkt` a random ID and encodes it.
Encoded encode_with_random_id(ldns_pkt* pkt);
// A query for `name` `type` class IN, no EDNS, with a random ID.
Encoded encode_query(const std::string& name, const std::string& type, bool recursion_desired);

// Whether a reply's question is the one asked (name, type, class IN): there may be none (error
// replies to an UPDATE), and more than one never fits.
enum class QuestionFit { absent, ours, other };
QuestionFit question_fit(const ldns_pkt* reply, const std::string& name, const std::string& type);

// The answer-section records of `type` (of owner `owner`, or of any owner when it is ""), each
// as the text of its rdata fields (rdf_text).
std::vector<std::vector<std::string>> answer_rdata(const ldns_pkt* reply, const std::string& type,
                                                   const std::string& owner = "");

}  // namespace fo::probes::dns
