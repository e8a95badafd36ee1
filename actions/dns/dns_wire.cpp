// DNS messages of the dns step with ldns (see dns_wire.hpp).
#include "actions/dns/dns_wire.hpp"

#include <arpa/inet.h>
#include <ldns/ldns.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace fo::actions::dns {
namespace {

// Seconds of clock difference a server may see in our TSIG timestamp (the RFC 8945 default).
constexpr uint16_t kTsigFudge = 300;

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
struct CFree {
  void operator()(void* p) const { std::free(p); }
};

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string rdf_text(const ldns_rdf* rdf) {
  std::unique_ptr<char, CFree> text(ldns_rdf2str(rdf));
  return text ? std::string(text.get()) : std::string();
}

std::string canonical_value(const ldns_rr* rr) {
  if (ldns_rr_rd_count(rr) < 1) return "";
  const ldns_rdf* rdf = ldns_rr_rdf(rr, 0);
  std::string text = rdf_text(rdf);
  const ldns_rr_type type = ldns_rr_get_type(rr);
  if (type == LDNS_RR_TYPE_A || type == LDNS_RR_TYPE_AAAA) {
    const int family = type == LDNS_RR_TYPE_A ? AF_INET : AF_INET6;
    unsigned char buf[16];
    char out[INET6_ADDRSTRLEN] = {};
    if (inet_pton(family, text.c_str(), buf) != 1 || !inet_ntop(family, buf, out, sizeof out))
      return "";
    return out;
  }
  return lower(text);
}

std::string rcode_name(ldns_pkt_rcode rcode) {
  const ldns_lookup_table* entry = ldns_lookup_by_id(ldns_rcodes, static_cast<int>(rcode));
  return entry && entry->name ? entry->name : "rcode " + std::to_string(int(rcode));
}

std::string tsig_error_name(uint16_t e) {
  switch (e) {
    case 0:
      return "";
    case 16:
      return "BADSIG";
    case 17:
      return "BADKEY";
    case 18:
      return "BADTIME";
    case 22:
      return "BADTRUNC";
    default:
      return "error " + std::to_string(e);
  }
}

// Signs `pkt` (its ID final), encodes it and records the MAC.
void finish(ldns_pkt* pkt, const TsigKey* key, Request& out) {
  ldns_pkt_set_random_id(pkt);
  out.id = ldns_pkt_id(pkt);
  if (key) {
    const ldns_status s = ldns_pkt_tsig_sign(pkt, key->name.c_str(), key->secret.c_str(),
                                             kTsigFudge, key->ldns_algorithm.c_str(), nullptr);
    if (s != LDNS_STATUS_OK) {
      out.error = std::string("cannot sign with TSIG key '") + key->name +
                  "': " + ldns_get_errorstr_by_id(s);
      return;
    }
    const ldns_rr* tsig = ldns_pkt_tsig(pkt);
    const ldns_rdf* mac = tsig && ldns_rr_rd_count(tsig) > 3 ? ldns_rr_rdf(tsig, 3) : nullptr;
    if (!mac) {
      out.error = "cannot sign: no TSIG record";
      return;
    }
    out.mac.assign(ldns_rdf_data(mac), ldns_rdf_data(mac) + ldns_rdf_size(mac));
    out.signed_with_tsig = true;
  }
  uint8_t* wire = nullptr;
  std::size_t size = 0;
  if (ldns_pkt2wire(&wire, pkt, &size) != LDNS_STATUS_OK || !wire) {
    out.error = "cannot encode the DNS message";
    return;
  }
  std::unique_ptr<uint8_t, CFree> owned(wire);
  out.wire.assign(wire, wire + size);
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
  finish(pkt.get(), key, out);
  return out;
}

Request build_query(const std::string& name, const std::string& type, const TsigKey* key) {
  Request out;
  out.qname = name;
  out.qtype = type;
  const ldns_rr_type t = ldns_get_rr_type_by_name(type.c_str());
  ldns_rdf* qname = ldns_dname_new_frm_str(name.c_str());
  if (!qname || t == 0) {
    if (qname) ldns_rdf_deep_free(qname);
    out.error = "invalid query " + name + " " + type;
    return out;
  }
  PktPtr pkt(ldns_pkt_query_new(qname, t, LDNS_RR_CLASS_IN, 0));  // owns qname; RD clear
  if (!pkt) {
    out.error = "out of memory";
    return out;
  }
  finish(pkt.get(), key, out);
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
  r.rcode = rcode_name(ldns_pkt_get_rcode(pkt.get()));
  r.authoritative = ldns_pkt_aa(pkt.get());
  r.truncated = ldns_pkt_tc(pkt.get());
  // The question (zone section of an UPDATE reply) may be empty in error replies; when present
  // it must be ours.
  RdfPtr want(ldns_dname_new_frm_str(request.qname.c_str()));
  const ldns_rr_list* q = ldns_pkt_question(pkt.get());
  if (q && ldns_rr_list_rr_count(q) > 0) {
    const ldns_rr* rr = ldns_rr_list_rr(q, 0);
    if (ldns_rr_list_rr_count(q) != 1 || !want ||
        ldns_dname_compare(ldns_rr_owner(rr), want.get()) != 0 ||
        ldns_rr_get_type(rr) != ldns_get_rr_type_by_name(request.qtype.c_str())) {
      r.parsed = false;
      r.error = "reply is for another question";
      return r;
    }
  }
  if (const ldns_rr* tsig = ldns_pkt_tsig(pkt.get())) {
    r.has_tsig = true;
    if (ldns_rr_rd_count(tsig) > 5)
      r.tsig_error = tsig_error_name(ldns_rdf2native_int16(ldns_rr_rdf(tsig, 5)));
    if (key && request.signed_with_tsig && r.tsig_error.empty()) {
      RdfPtr mac(
          ldns_rdf_new_frm_data(LDNS_RDF_TYPE_INT16_DATA, request.mac.size(), request.mac.data()));
      r.tsig_verified = mac && ldns_pkt_tsig_verify(pkt.get(), data, len, key->name.c_str(),
                                                    key->secret.c_str(), mac.get());
    }
  }
  if (want) {
    const ldns_rr_type type = ldns_get_rr_type_by_name(request.qtype.c_str());
    RrListPtr answers(
        ldns_pkt_rr_list_by_name_and_type(pkt.get(), want.get(), type, LDNS_SECTION_ANSWER));
    const std::size_t n = answers ? ldns_rr_list_rr_count(answers.get()) : 0;
    for (std::size_t i = 0; i < n; ++i) {
      const ldns_rr* rr = ldns_rr_list_rr(answers.get(), i);
      if (type == LDNS_RR_TYPE_SOA) {
        if (ldns_rr_rd_count(rr) > 2) r.soa_serial = ldns_rdf2native_int32(ldns_rr_rdf(rr, 2));
        continue;
      }
      std::string v = canonical_value(rr);
      if (!v.empty() && std::find(r.values.begin(), r.values.end(), v) == r.values.end())
        r.values.push_back(std::move(v));
    }
    std::sort(r.values.begin(), r.values.end());
  }
  return r;
}

std::string join_values(const std::vector<std::string>& values) {
  if (values.empty()) return "nothing";
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ", ") + v;
  return out;
}

}  // namespace fo::actions::dns
