// DNS probe messages with ldns (see dns_message.hpp), and the ldns helpers the dns step shares
// with the probe (see ldns_util.hpp; here so that both come with fo_probes).
#include "probes/dns/dns_message.hpp"

#include <algorithm>

#include "probes/dns/ldns_util.hpp"
#include "probes/net.hpp"

namespace fo::probes::dns {

// --- shared helpers (ldns_util.hpp) -----------------------------------------------------------

std::string lower_ascii(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
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
  MallocPtr<char> text(ldns_rdf2str(rdf));
  return text ? std::string(text.get()) : std::string();
}

std::string rcode_name(ldns_pkt_rcode rcode) {
  const ldns_lookup_table* entry = ldns_lookup_by_id(ldns_rcodes, static_cast<int>(rcode));
  return entry && entry->name ? entry->name : "rcode " + std::to_string(int(rcode));
}

Encoded encode_with_random_id(ldns_pkt* pkt) {
  Encoded out;
  ldns_pkt_set_random_id(pkt);
  out.id = ldns_pkt_id(pkt);
  uint8_t* wire = nullptr;
  std::size_t size = 0;
  if (ldns_pkt2wire(&wire, pkt, &size) != LDNS_STATUS_OK || !wire) {
    out.error = "cannot encode the DNS message";
    return out;
  }
  MallocPtr<uint8_t> owned(wire);
  out.wire.assign(wire, wire + size);
  return out;
}

Encoded encode_query(const std::string& name, const std::string& type, bool recursion_desired) {
  Encoded out;
  const ldns_rr_type t = ldns_get_rr_type_by_name(type.c_str());
  ldns_rdf* qname = ldns_dname_new_frm_str(name.c_str());
  if (!qname || t == 0) {
    if (qname) ldns_rdf_deep_free(qname);
    out.error = "invalid query " + name + " " + type;
    return out;
  }
  PktPtr pkt(ldns_pkt_query_new(qname, t, LDNS_RR_CLASS_IN,
                                recursion_desired ? LDNS_RD : 0));  // owns qname
  if (!pkt) {
    out.error = "out of memory";
    return out;
  }
  return encode_with_random_id(pkt.get());
}

QuestionFit question_fit(const ldns_pkt* reply, const std::string& name, const std::string& type) {
  const ldns_rr_list* q = ldns_pkt_question(reply);
  if (!q || ldns_rr_list_rr_count(q) == 0) return QuestionFit::absent;
  if (ldns_rr_list_rr_count(q) != 1) return QuestionFit::other;
  const ldns_rr* rr = ldns_rr_list_rr(q, 0);
  RdfPtr want(ldns_dname_new_frm_str(name.c_str()));
  const bool same = want && ldns_dname_compare(ldns_rr_owner(rr), want.get()) == 0 &&
                    ldns_rr_get_type(rr) == ldns_get_rr_type_by_name(type.c_str()) &&
                    ldns_rr_get_class(rr) == LDNS_RR_CLASS_IN;
  return same ? QuestionFit::ours : QuestionFit::other;
}

std::vector<std::vector<std::string>> answer_rdata(const ldns_pkt* reply, const std::string& type,
                                                   const std::string& owner) {
  std::vector<std::vector<std::string>> out;
  const ldns_rr_type t = ldns_get_rr_type_by_name(type.c_str());
  if (t == 0) return out;
  RrListPtr answers;
  if (owner.empty()) {
    answers.reset(ldns_pkt_rr_list_by_type(reply, t, LDNS_SECTION_ANSWER));
  } else {
    RdfPtr name(ldns_dname_new_frm_str(owner.c_str()));
    if (!name) return out;
    answers.reset(ldns_pkt_rr_list_by_name_and_type(reply, name.get(), t, LDNS_SECTION_ANSWER));
  }
  const std::size_t count = answers ? ldns_rr_list_rr_count(answers.get()) : 0;
  for (std::size_t i = 0; i < count; ++i) {
    const ldns_rr* rr = ldns_rr_list_rr(answers.get(), i);
    std::vector<std::string> fields;
    for (std::size_t f = 0; f < ldns_rr_rd_count(rr); ++f)
      fields.push_back(rdf_text(ldns_rr_rdf(rr, f)));
    out.push_back(std::move(fields));
  }
  return out;
}

// --- the probe's messages -------------------------------------------------------------------

namespace {

constexpr std::size_t kMaxExpectShown = 64;

// Lower case, and no trailing dot on any space-separated word: "10 Mail.Example." ->
// "10 mail.example".
std::string normalize_names(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    std::string word = lower_ascii(text.substr(start, end - start));
    if (word.size() > 1 && word.back() == '.') word.pop_back();
    if (!out.empty() || start > 0) out += ' ';
    out += word;
    start = end + 1;
  }
  return out;
}

ProbeResult judge_answer(const ldns_pkt* reply, const config::DnsProbe& spec) {
  const std::string rcode = rcode_name(ldns_pkt_get_rcode(reply));
  if (rcode != spec.rcode) {
    if (spec.rcode == "NOERROR") return ProbeResult::failure(rcode);
    return ProbeResult::failure("rcode " + rcode + ", expected " + spec.rcode);
  }
  if (spec.rcode != "NOERROR") return ProbeResult::success();
  // Any owner: a resolver's answer to an alias holds the CNAME chain's target records.
  const std::vector<std::vector<std::string>> answers = answer_rdata(reply, spec.type);
  if (answers.empty()) return ProbeResult::failure("no " + spec.type + " record in the answer");
  if (spec.expect.empty()) return ProbeResult::success();
  const std::string want = spec.type == "TXT" ? spec.expect : normalize_names(spec.expect);
  for (const std::vector<std::string>& fields : answers)
    for (const std::string& candidate : rdata_candidates(spec.type, fields))
      if (candidate == want) return ProbeResult::success();
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
  return encode_query(spec.name, spec.type, true);
}

Reply judge_reply(const config::DnsProbe& spec, uint16_t id, const uint8_t* data, std::size_t len) {
  Reply out;
  ldns_pkt* raw = nullptr;
  if (ldns_wire2pkt(&raw, data, len) != LDNS_STATUS_OK || !raw) return out;
  PktPtr reply(raw);
  if (!ldns_pkt_qr(reply.get()) || ldns_pkt_id(reply.get()) != id ||
      question_fit(reply.get(), spec.name, spec.type) != QuestionFit::ours) {
    out.fit = Reply::Fit::other_query;
    return out;
  }
  out.fit = Reply::Fit::matches;
  out.truncated = ldns_pkt_tc(reply.get());
  if (!out.truncated) out.result = judge_answer(reply.get(), spec);
  return out;
}

}  // namespace fo::probes::dns
