// DNS probe messages with ldns (see dns_message.hpp).
#include "probes/dns/dns_message.hpp"

#include <ldns/ldns.h>

#include <cstdlib>
#include <memory>

#include "probes/net.hpp"

namespace fo::probes::dns {
namespace {

constexpr std::size_t kMaxExpectShown = 64;

struct PktFree {
  void operator()(ldns_pkt* p) const { ldns_pkt_free(p); }
};
using PktPtr = std::unique_ptr<ldns_pkt, PktFree>;
struct RdfFree {
  void operator()(ldns_rdf* r) const { ldns_rdf_deep_free(r); }
};
using RdfPtr = std::unique_ptr<ldns_rdf, RdfFree>;
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

// Lower case, and no trailing dot on any space-separated word: "10 Mail.Example." ->
// "10 mail.example".
std::string normalize_names(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    std::string word = lower(text.substr(start, end - start));
    if (word.size() > 1 && word.back() == '.') word.pop_back();
    if (!out.empty() || start > 0) out += ' ';
    out += word;
    start = end + 1;
  }
  return out;
}

std::string rdf_text(const ldns_rdf* rdf) {
  if (ldns_rdf_get_type(rdf) == LDNS_RDF_TYPE_STR) {
    // A TXT character-string: length byte, then raw bytes (ldns_rdf2str would quote/escape).
    const uint8_t* data = ldns_rdf_data(rdf);
    const std::size_t size = ldns_rdf_size(rdf);
    if (size == 0) return "";
    const std::size_t n = std::min<std::size_t>(data[0], size - 1);
    return std::string(reinterpret_cast<const char*>(data + 1), n);
  }
  std::unique_ptr<char, CFree> text(ldns_rdf2str(rdf));
  return text ? std::string(text.get()) : std::string();
}

std::string rcode_name(ldns_pkt_rcode rcode) {
  const ldns_lookup_table* entry = ldns_lookup_by_id(ldns_rcodes, static_cast<int>(rcode));
  return entry && entry->name ? entry->name : "rcode " + std::to_string(int(rcode));
}

bool question_matches(const ldns_pkt* reply, const config::DnsProbe& spec) {
  const ldns_rr_list* q = ldns_pkt_question(reply);
  if (!q || ldns_rr_list_rr_count(q) != 1) return false;
  const ldns_rr* rr = ldns_rr_list_rr(q, 0);
  RdfPtr want(ldns_dname_new_frm_str(spec.name.c_str()));
  return want && ldns_dname_compare(ldns_rr_owner(rr), want.get()) == 0 &&
         ldns_rr_get_type(rr) == ldns_get_rr_type_by_name(spec.type.c_str()) &&
         ldns_rr_get_class(rr) == LDNS_RR_CLASS_IN;
}

ProbeResult judge_answer(const ldns_pkt* reply, const config::DnsProbe& spec) {
  const std::string rcode = rcode_name(ldns_pkt_get_rcode(reply));
  if (rcode != spec.rcode) {
    if (spec.rcode == "NOERROR") return ProbeResult::failure(rcode);
    return ProbeResult::failure("rcode " + rcode + ", expected " + spec.rcode);
  }
  if (spec.rcode != "NOERROR") return ProbeResult::success();
  const ldns_rr_type type = ldns_get_rr_type_by_name(spec.type.c_str());
  RrListPtr answers(ldns_pkt_rr_list_by_type(reply, type, LDNS_SECTION_ANSWER));
  const std::size_t count = answers ? ldns_rr_list_rr_count(answers.get()) : 0;
  if (count == 0) return ProbeResult::failure("no " + spec.type + " record in the answer");
  if (spec.expect.empty()) return ProbeResult::success();
  const std::string want = spec.type == "TXT" ? spec.expect : normalize_names(spec.expect);
  for (std::size_t i = 0; i < count; ++i) {
    const ldns_rr* rr = ldns_rr_list_rr(answers.get(), i);
    std::vector<std::string> fields;
    for (std::size_t f = 0; f < ldns_rr_rd_count(rr); ++f)
      fields.push_back(rdf_text(ldns_rr_rdf(rr, f)));
    for (const std::string& candidate : rdata_candidates(spec.type, fields))
      if (candidate == want) return ProbeResult::success();
  }
  return ProbeResult::failure("answer does not contain " + shorten(spec.expect, kMaxExpectShown));
}

}  // namespace

std::vector<std::string> rdata_candidates(const std::string& type,
                                          const std::vector<std::string>& fields) {
  std::vector<std::string> out;
  std::string all;
  for (const std::string& field : fields) {
    if (type == "TXT") {
      out.push_back(field);
      all += field;
    } else {
      out.push_back(normalize_names(field));
      all += (all.empty() ? "" : " ") + out.back();
    }
  }
  if (fields.size() > 1) out.push_back(all);
  return out;
}

Query build_query(const config::DnsProbe& spec) {
  Query q;
  const ldns_rr_type type = ldns_get_rr_type_by_name(spec.type.c_str());
  ldns_rdf* name = ldns_dname_new_frm_str(spec.name.c_str());
  if (!name || type == 0) {
    if (name) ldns_rdf_deep_free(name);
    q.error = "invalid query " + spec.name + " " + spec.type;
    return q;
  }
  PktPtr pkt(ldns_pkt_query_new(name, type, LDNS_RR_CLASS_IN, LDNS_RD));  // owns `name`
  if (!pkt) {
    q.error = "out of memory";
    return q;
  }
  ldns_pkt_set_random_id(pkt.get());
  q.id = ldns_pkt_id(pkt.get());
  uint8_t* wire = nullptr;
  std::size_t size = 0;
  if (ldns_pkt2wire(&wire, pkt.get(), &size) != LDNS_STATUS_OK || !wire) {
    q.error = "cannot encode query";
    return q;
  }
  std::unique_ptr<uint8_t, CFree> owned(wire);
  q.wire.assign(wire, wire + size);
  return q;
}

Reply judge_reply(const config::DnsProbe& spec, uint16_t id, const uint8_t* data, std::size_t len) {
  Reply out;
  ldns_pkt* raw = nullptr;
  if (ldns_wire2pkt(&raw, data, len) != LDNS_STATUS_OK || !raw) return out;
  PktPtr reply(raw);
  if (!ldns_pkt_qr(reply.get()) || ldns_pkt_id(reply.get()) != id ||
      !question_matches(reply.get(), spec)) {
    out.fit = Reply::Fit::other_query;
    return out;
  }
  out.fit = Reply::Fit::matches;
  out.truncated = ldns_pkt_tc(reply.get());
  if (!out.truncated) out.result = judge_answer(reply.get(), spec);
  return out;
}

}  // namespace fo::probes::dns
