// The DNS message helpers the dns probe and the dns step share (probes/dns/ldns_util.hpp):
// query encoding, question matching, answer rdata and rcode names, on messages built here.
#include <catch2/catch.hpp>

#include "probes/dns/ldns_util.hpp"

using namespace fo::probes::dns;

namespace {

PktPtr parse(const std::vector<uint8_t>& wire) {
  ldns_pkt* raw = nullptr;
  REQUIRE(ldns_wire2pkt(&raw, wire.data(), wire.size()) == LDNS_STATUS_OK);
  return PktPtr(raw);
}

// A reply to `name` `type` with the given answer records (zone-file lines).
PktPtr reply(const std::string& name, const std::string& type,
             const std::vector<std::string>& answers, ldns_rr_class qclass = LDNS_RR_CLASS_IN) {
  PktPtr pkt(ldns_pkt_query_new(ldns_dname_new_frm_str(name.c_str()),
                                ldns_get_rr_type_by_name(type.c_str()), qclass, 0));
  REQUIRE(pkt);
  ldns_pkt_set_qr(pkt.get(), true);
  for (const std::string& line : answers) {
    ldns_rr* rr = nullptr;
    REQUIRE(ldns_rr_new_frm_str(&rr, line.c_str(), 0, nullptr, nullptr) == LDNS_STATUS_OK);
    ldns_pkt_push_rr(pkt.get(), LDNS_SECTION_ANSWER, rr);
  }
  return pkt;
}

}  // namespace

TEST_CASE("dns shared helpers encode queries with a random ID", "[dns][ldns_util]") {
  for (bool rd : {true, false}) {
    const Encoded e = encode_query("www.Failover.test.", "AAAA", rd);
    REQUIRE(e.error.empty());
    PktPtr back = parse(e.wire);
    CHECK(ldns_pkt_id(back.get()) == e.id);
    CHECK(ldns_pkt_rd(back.get()) == rd);
    CHECK_FALSE(ldns_pkt_qr(back.get()));
    CHECK(question_fit(back.get(), "www.failover.test.", "AAAA") == QuestionFit::ours);
  }
  // IDs differ from query to query (not a fixed or counting ID).
  std::vector<uint16_t> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(encode_query("a.test.", "A", false).id);
  std::sort(ids.begin(), ids.end());
  CHECK(std::unique(ids.begin(), ids.end()) - ids.begin() > 1);
  CHECK(encode_query("a.test.", "NOPE", false).error == "invalid query a.test. NOPE");
  CHECK(encode_query("a..test.", "A", false).error == "invalid query a..test. A");
}

TEST_CASE("dns shared helpers match the question by name, type and class", "[dns][ldns_util]") {
  PktPtr r = reply("www.failover.test.", "A", {});
  CHECK(question_fit(r.get(), "WWW.failover.test.", "A") == QuestionFit::ours);
  CHECK(question_fit(r.get(), "www.failover.test", "A") == QuestionFit::ours);
  CHECK(question_fit(r.get(), "ftp.failover.test.", "A") == QuestionFit::other);
  CHECK(question_fit(r.get(), "www.failover.test.", "AAAA") == QuestionFit::other);
  PktPtr chaos = reply("www.failover.test.", "A", {}, LDNS_RR_CLASS_CH);
  CHECK(question_fit(chaos.get(), "www.failover.test.", "A") == QuestionFit::other);
  // No question (an error reply to an UPDATE may have none), or two.
  PktPtr none(ldns_pkt_new());
  CHECK(question_fit(none.get(), "www.failover.test.", "A") == QuestionFit::absent);
  ldns_rr* q = nullptr;
  REQUIRE(ldns_rr_new_question_frm_str(&q, "other.test. IN A", nullptr, nullptr) == LDNS_STATUS_OK);
  ldns_pkt_push_rr(r.get(), LDNS_SECTION_QUESTION, q);
  CHECK(question_fit(r.get(), "www.failover.test.", "A") == QuestionFit::other);
}

TEST_CASE("dns shared helpers read answer rdata by type and owner", "[dns][ldns_util]") {
  PktPtr r =
      reply("alias.failover.test.", "A",
            {"alias.failover.test. 30 IN CNAME WWW.failover.test.",
             "www.failover.test. 30 IN A 198.51.100.20", "www.failover.test. 30 IN A 198.51.100.21",
             "txt.failover.test. 30 IN TXT \"v=1 x\" \"two\"",
             "failover.test. 30 IN MX 10 mail.failover.test."});
  using Rows = std::vector<std::vector<std::string>>;
  CHECK(answer_rdata(r.get(), "A") == Rows{{"198.51.100.20"}, {"198.51.100.21"}});
  CHECK(answer_rdata(r.get(), "A", "alias.failover.test.").empty());
  CHECK(answer_rdata(r.get(), "CNAME", "Alias.Failover.Test.") == Rows{{"WWW.failover.test."}});
  CHECK(answer_rdata(r.get(), "TXT") == Rows{{"v=1 x", "two"}});
  CHECK(answer_rdata(r.get(), "AAAA").empty());
  CHECK(answer_rdata(r.get(), "NOPE").empty());
}

TEST_CASE("dns shared helpers name rcodes and lower ASCII only", "[dns][ldns_util]") {
  CHECK(rcode_name(LDNS_RCODE_NOERROR) == "NOERROR");
  CHECK(rcode_name(LDNS_RCODE_NXDOMAIN) == "NXDOMAIN");
  CHECK(rcode_name(LDNS_RCODE_NOTAUTH) == "NOTAUTH");
  CHECK(rcode_name(static_cast<ldns_pkt_rcode>(15)) == "rcode 15");
  CHECK(lower_ascii("WwW.Ex-1.\xC3\x84") == "www.ex-1.\xC3\x84");
}
