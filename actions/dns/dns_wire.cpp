// DNS messages of the dns step with ldns (see dns_wire.hpp).
#include "actions/dns/dns_wire.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include "actions/dns/tsig.hpp"
#include "probes/dns/ldns_util.hpp"

namespace fo::actions::dns {
namespace {

using probes::dns::answer_rdata;
using probes::dns::Encoded;
using probes::dns::PktPtr;
using probes::dns::QuestionFit;
using probes::dns::RdfPtr;
using probes::dns::RrListPtr;
using probes::dns::RrPtr;

// Addresses in one spelling (inet_ntop's), names in lower case: what the config holds.
std::string canonical_value(const std::string& type, const std::string& text) {
  if (type == "A" || type == "AAAA") {
    const int family = type == "A" ? AF_INET : AF_INET6;
    unsigned char buf[16];
    char out[INET6_ADDRSTRLEN] = {};
    if (inet_pton(family, text.c_str(), buf) != 1 || !inet_ntop(family, buf, out, sizeof out))
      return "";
    return out;
  }
  return probes::dns::lower_ascii(text);
}

// Takes the encoded message and signs it when `key` is set.
void finish(Encoded encoded, const TsigKey* key, Request& out) {
  out.id = encoded.id;
  out.wire = std::move(encoded.wire);
  out.error = std::move(encoded.error);
  if (!out.error.empty() || !key) return;
  TsigSigned s = tsig_sign(out.wire, *key, static_cast<std::uint64_t>(std::time(nullptr)));
  if (!s.error.empty()) {
    out.wire.clear();
    out.error = s.error;
    return;
  }
  out.wire = std::move(s.wire);
  out.mac = std::move(s.mac);
  out.signed_with_tsig = true;
}

}  // namespace

Request build_update(const config::DnsStep& step, const std::vector<std::string>& values,
                     const TsigKey* key) {
  Request out;
  out.qname = step.zone;
  out.qtype = "SOA";
  const ldns_rr_type type = ldns_get_rr_type_by_name(step.type.c_str());
  RdfPtr owner(ldns_dname_new_frm_str(step.record.c_str()));
  ldns_rdf* zone = ldns_dname_new_frm_str(step.zone.c_str());
  RdfPtr zone_guard(zone);
  RrListPtr updates(ldns_rr_list_new());
  if (!owner || !zone || !updates || type == 0) {
    out.error = "invalid record " + step.record + " " + step.type;
    return out;
  }
  // "Delete an RRset" (RFC 2136 2.5.2): class ANY, TTL 0, no rdata.
  RrPtr del(ldns_rr_new());
  if (!del) {
    out.error = "out of memory";
    return out;
  }
  ldns_rr_set_owner(del.get(), owner.release());
  ldns_rr_set_type(del.get(), type);
  ldns_rr_set_class(del.get(), LDNS_RR_CLASS_ANY);
  ldns_rr_set_ttl(del.get(), 0);
  ldns_rr_list_push_rr(updates.get(), del.release());
  for (const std::string& value : values) {
    const std::string text =
        step.record + " " + std::to_string(step.ttl) + " IN " + step.type + " " + value;
    ldns_rr* rr = nullptr;
    if (ldns_rr_new_frm_str(&rr, text.c_str(), 0, nullptr, nullptr) != LDNS_STATUS_OK || !rr) {
      out.error = "invalid record value " + value;
      return out;
    }
    ldns_rr_list_push_rr(updates.get(), rr);
  }
  PktPtr pkt(
      ldns_update_pkt_new(zone_guard.release(), LDNS_RR_CLASS_IN, nullptr, updates.get(), nullptr));
  if (!pkt) {
    out.error = "cannot build the UPDATE";
    return out;
  }
  // ldns_update_pkt_new sets RD; an UPDATE has no use for it. Both before signing: the MAC
  // covers the header.
  ldns_pkt_set_rd(pkt.get(), false);
  finish(probes::dns::encode_with_random_id(pkt.get()), key, out);
  return out;
}

Request build_query(const std::string& name, const std::string& type, const TsigKey* key) {
  Request out;
  out.qname = name;
  out.qtype = type;
  finish(probes::dns::encode_query(name, type, false), key, out);  // RD clear
  return out;
}

Reply read_reply(const Request& request, const uint8_t* data, std::size_t len, const TsigKey* key) {
  Reply r;
  ldns_pkt* raw = nullptr;
  if (ldns_wire2pkt(&raw, data, len) != LDNS_STATUS_OK || !raw) {
    r.error = "unparsable reply";
    return r;
  }
  PktPtr pkt(raw);
  if (!ldns_pkt_qr(pkt.get()) || ldns_pkt_id(pkt.get()) != request.id) {
    r.error = "reply does not answer the request";
    return r;
  }
  r.parsed = true;
  r.rcode = probes::dns::rcode_name(ldns_pkt_get_rcode(pkt.get()));
  r.authoritative = ldns_pkt_aa(pkt.get());
  r.truncated = ldns_pkt_tc(pkt.get());
  // The question (zone section of an UPDATE reply) may be empty in error replies; when present
  // it must be ours.
  if (probes::dns::question_fit(pkt.get(), request.qname, request.qtype) == QuestionFit::other) {
    r.parsed = false;
    r.error = "reply is for another question";
    return r;
  }
  if (key && request.signed_with_tsig) {
    const TsigVerdict v =
        tsig_verify(data, len, *key, request.mac, static_cast<std::uint64_t>(std::time(nullptr)));
    r.has_tsig = v.status != TsigVerdict::Status::unsigned_message;
    r.tsig_error = tsig_error_name(v.error);
    r.tsig_verified = v.status == TsigVerdict::Status::verified;
    r.tsig_problem =
        v.status == TsigVerdict::Status::unsigned_message ? "it is not signed" : v.problem;
  } else if (const ldns_rr* tsig = ldns_pkt_tsig(pkt.get())) {
    r.has_tsig = true;
    if (ldns_rr_rd_count(tsig) > 5 && ldns_rdf_size(ldns_rr_rdf(tsig, 5)) == 2)
      r.tsig_error = tsig_error_name(ldns_rdf2native_int16(ldns_rr_rdf(tsig, 5)));
  }
  for (const std::vector<std::string>& fields :
       answer_rdata(pkt.get(), request.qtype, request.qname)) {
    if (fields.empty()) continue;
    if (request.qtype == "SOA") {
      if (fields.size() > 2)
        r.soa_serial = static_cast<std::uint32_t>(std::strtoul(fields[2].c_str(), nullptr, 10));
      continue;
    }
    std::string v = canonical_value(request.qtype, fields[0]);
    if (!v.empty() && std::find(r.values.begin(), r.values.end(), v) == r.values.end())
      r.values.push_back(std::move(v));
  }
  std::sort(r.values.begin(), r.values.end());
  return r;
}

std::string join_values(const std::vector<std::string>& values) {
  if (values.empty()) return "nothing";
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ", ") + v;
  return out;
}

}  // namespace fo::actions::dns
