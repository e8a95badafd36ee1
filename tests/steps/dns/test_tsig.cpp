// TSIG of the dns step without a server: the HMAC primitive against the RFC 2202/4231 vectors,
// our signatures checked by ldns' own TSIG code (and the other way round) for the algorithms
// ldns supports, and reply verification: tampering, another request, clock skew, errors and
// garbage. The BIND tests (test_dns_step.cpp) prove the wire format for sha224 and sha384.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>

#include "actions/dns/dns_wire.hpp"
#include "actions/dns/tsig.hpp"
#include "actions/dns/tsig_key.hpp"
#include "probes/dns/ldns_util.hpp"
#include "tests/steps/dns/dns_servers.hpp"

using fo::actions::dns::parse_tsig_key;
using fo::actions::dns::tsig_hmac;
using fo::actions::dns::tsig_sign;
using fo::actions::dns::tsig_verify;
using fo::actions::dns::TsigKey;
using fo::actions::dns::TsigVerdict;
using Status = TsigVerdict::Status;

namespace {

std::vector<uint8_t> bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string hex(const std::vector<uint8_t>& v) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : v) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

TsigKey key(const std::string& algorithm, const std::string& secret,
            const std::string& name = "feas-key") {
  auto p = parse_tsig_key(fo::test::dns::key_file_text(name, secret, algorithm));
  REQUIRE(p.ok);
  return p.key;
}

uint64_t now() {
  return static_cast<uint64_t>(std::time(nullptr));
}

using Pkt = fo::probes::dns::PktPtr;

std::vector<uint8_t> to_wire(ldns_pkt* pkt) {
  uint8_t* wire = nullptr;
  std::size_t size = 0;
  REQUIRE(ldns_pkt2wire(&wire, pkt, &size) == LDNS_STATUS_OK);
  std::vector<uint8_t> out(wire, wire + size);
  std::free(wire);
  return out;
}

Pkt query(const std::string& name = "failover.test.") {
  Pkt pkt(ldns_pkt_query_new(ldns_dname_new_frm_str(name.c_str()), LDNS_RR_TYPE_SOA,
                             LDNS_RR_CLASS_IN, 0));
  REQUIRE(pkt);
  ldns_pkt_set_id(pkt.get(), 0x4711);
  return pkt;
}

// What a server answers: the question, one SOA record, QR and AA set.
std::vector<uint8_t> reply_wire(uint16_t id = 0x4711) {
  Pkt pkt = query();
  ldns_pkt_set_id(pkt.get(), id);
  ldns_pkt_set_qr(pkt.get(), true);
  ldns_pkt_set_aa(pkt.get(), true);
  ldns_rr* soa = nullptr;
  REQUIRE(ldns_rr_new_frm_str(&soa,
                              "failover.test. 30 IN SOA ns1.failover.test. "
                              "hostmaster.failover.test. 7 60 30 3600 30",
                              0, nullptr, nullptr) == LDNS_STATUS_OK);
  ldns_pkt_push_rr(pkt.get(), LDNS_SECTION_ANSWER, soa);
  return to_wire(pkt.get());
}

using fo::test::dns::kSha224Secret;
using fo::test::dns::kSha384Secret;

}  // namespace

TEST_CASE("tsig HMAC matches the RFC 2202 and RFC 4231 vectors", "[dns][tsig]") {
  // RFC 4231 test case 1: key 0x0b x 20, "Hi There".
  const std::vector<uint8_t> k1(20, 0x0b);
  const auto hi = bytes("Hi There");
  CHECK(hex(tsig_hmac("hmac-sha224", k1, hi)) ==
        "896fb1128abbdf196832107cd49df33f47b4b1169912ba4f53684b22");
  CHECK(hex(tsig_hmac("hmac-sha256", k1, hi)) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex(tsig_hmac("hmac-sha384", k1, hi)) ==
        "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59c"
        "faea9ea9076ede7f4af152e8b2fa9cb6");
  CHECK(hex(tsig_hmac("hmac-sha512", k1, hi)) ==
        "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde"
        "daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854");
  // RFC 4231 test case 2: key "Jefe".
  const auto jefe = bytes("Jefe");
  const auto want = bytes("what do ya want for nothing?");
  CHECK(hex(tsig_hmac("hmac-sha224", jefe, want)) ==
        "a30e01098bc6dbbf45690f3a7e9e6d0f8bbea2a39e6148008fd05e44");
  CHECK(hex(tsig_hmac("hmac-sha384", jefe, want)) ==
        "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e"
        "8e2240ca5e69e2c78b3239ecfab21649");
  // RFC 2202 test case 1 for the old ones.
  CHECK(hex(tsig_hmac("hmac-md5", std::vector<uint8_t>(16, 0x0b), hi)) ==
        "9294727a3638bb1c13f48ef8158bfc9d");
  CHECK(hex(tsig_hmac("hmac-sha1", k1, hi)) == "b617318655057264e28bc0b6fb378c8ef146be00");
  CHECK(tsig_hmac("rsa", k1, hi).empty());
}

TEST_CASE("tsig requests we sign verify with ldns and ldns-signed ones verify with us",
          "[dns][tsig]") {
  // ldns 1.8.3 implements md5, sha1, sha256 and sha512: an independent implementation of the
  // same RFC for the part we share with it.
  for (const char* algorithm : {"hmac-md5", "hmac-sha1", "hmac-sha256", "hmac-sha512"}) {
    INFO(algorithm);
    const TsigKey k = key(algorithm, fo::test::dns::kSecret);
    Pkt q = query();
    auto signed_ = tsig_sign(to_wire(q.get()), k, now());
    REQUIRE(signed_.error.empty());
    ldns_pkt* parsed = nullptr;
    REQUIRE(ldns_wire2pkt(&parsed, signed_.wire.data(), signed_.wire.size()) == LDNS_STATUS_OK);
    Pkt back(parsed);
    REQUIRE(ldns_pkt_tsig(back.get()) != nullptr);
    CHECK(ldns_pkt_arcount(back.get()) == 0);  // ldns keeps the TSIG record apart
    CHECK(ldns_pkt_tsig_verify(back.get(), signed_.wire.data(), signed_.wire.size(), k.name.c_str(),
                               k.secret.c_str(), nullptr));
    const TsigKey wrong = key(algorithm, fo::test::dns::kWrongSecret);
    CHECK_FALSE(ldns_pkt_tsig_verify(back.get(), signed_.wire.data(), signed_.wire.size(),
                                     wrong.name.c_str(), wrong.secret.c_str(), nullptr));

    Pkt by_ldns = query();
    REQUIRE(ldns_pkt_tsig_sign(by_ldns.get(), k.name.c_str(), k.secret.c_str(), 300,
                               k.algorithm_name.c_str(), nullptr) == LDNS_STATUS_OK);
    const auto wire = to_wire(by_ldns.get());
    CHECK(tsig_verify(wire.data(), wire.size(), k, {}, now()).status == Status::verified);
    const TsigVerdict v = tsig_verify(wire.data(), wire.size(), wrong, {}, now());
    CHECK(v.status == Status::invalid);
    CHECK(v.problem == "the MAC does not match (BADSIG)");
  }
}

TEST_CASE("tsig replies verify only with the request's MAC, the key and the time", "[dns][tsig]") {
  for (const auto& [algorithm, secret, mac_size] :
       {std::tuple{"hmac-sha224", kSha224Secret, 28}, std::tuple{"hmac-sha384", kSha384Secret, 48},
        std::tuple{"hmac-sha256", fo::test::dns::kSecret, 32}}) {
    INFO(algorithm);
    const TsigKey k = key(algorithm, secret);
    Pkt q = query();
    const auto request = tsig_sign(to_wire(q.get()), k, now());
    REQUIRE(request.error.empty());
    CHECK(request.mac.size() == static_cast<std::size_t>(mac_size));
    CHECK(tsig_verify(request.wire.data(), request.wire.size(), k, {}, now()).status ==
          Status::verified);

    const auto reply = tsig_sign(reply_wire(), k, now(), request.mac);
    REQUIRE(reply.error.empty());
    const auto& w = reply.wire;
    CHECK(tsig_verify(w.data(), w.size(), k, request.mac, now()).status == Status::verified);
    // Within the fudge (300 s) either way, and not beyond.
    CHECK(tsig_verify(w.data(), w.size(), k, request.mac, now() + 290).status == Status::verified);
    const TsigVerdict late = tsig_verify(w.data(), w.size(), k, request.mac, now() + 400);
    CHECK(late.status == Status::invalid);
    CHECK(late.problem.find("(BADTIME)") != std::string::npos);
    // Another request's MAC: a reply replayed onto a new request.
    auto other = request.mac;
    other[0] ^= 1;
    CHECK(tsig_verify(w.data(), w.size(), k, other, now()).status == Status::invalid);
    // Every changed byte is detected, except the ID: the MAC covers the original ID instead
    // (RFC 8945 4.3.1), and read_reply matches the ID against the request.
    for (std::size_t i = 2; i < w.size(); ++i) {
      auto tampered = w;
      tampered[i] ^= 0x01;
      const TsigVerdict v = tsig_verify(tampered.data(), tampered.size(), k, request.mac, now());
      if (v.status == Status::verified) FAIL("byte " << i << " changed, still verified");
    }
    // A wrong secret, another key name, another algorithm.
    CHECK(tsig_verify(w.data(), w.size(), key(algorithm, fo::test::dns::kWrongSecret), request.mac,
                      now())
              .problem == "the MAC does not match (BADSIG)");
    CHECK(tsig_verify(w.data(), w.size(), key(algorithm, secret, "other-key"), request.mac, now())
              .problem == "signed with another key");
    CHECK(tsig_verify(w.data(), w.size(), key("hmac-sha512", secret), request.mac, now()).problem ==
          "signed with another algorithm");
  }
}

TEST_CASE("tsig errors, unsigned replies and garbage give verdicts", "[dns][tsig]") {
  const TsigKey k = key("hmac-sha384", kSha384Secret);
  Pkt q = query();
  const auto request = tsig_sign(to_wire(q.get()), k, now());
  REQUIRE(request.error.empty());

  const auto badtime = tsig_sign(reply_wire(), k, now() - 1000, request.mac, 18);
  REQUIRE(badtime.error.empty());
  TsigVerdict v = tsig_verify(badtime.wire.data(), badtime.wire.size(), k, request.mac, now());
  CHECK(v.status == Status::server_error);
  CHECK(fo::actions::dns::tsig_error_name(v.error) == "BADTIME");

  const auto plain = reply_wire();
  CHECK(tsig_verify(plain.data(), plain.size(), k, request.mac, now()).status ==
        Status::unsigned_message);

  // Cut anywhere, or random bytes: a verdict, never verified, never a crash (ASan build).
  const auto reply = tsig_sign(reply_wire(), k, now(), request.mac);
  for (std::size_t n = 0; n < reply.wire.size(); ++n)
    CHECK(tsig_verify(reply.wire.data(), n, k, request.mac, now()).status != Status::verified);
  std::mt19937 rng(5);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> junk(reply.wire);
    for (int j = 0; j < 4; ++j) junk[rng() % junk.size()] = static_cast<uint8_t>(rng());
    if (rng() % 2) junk.resize(rng() % junk.size());
    const TsigVerdict j = tsig_verify(junk.data(), junk.size(), k, request.mac, now());
    if (j.status == Status::verified && junk != reply.wire) FAIL("junk verified");
  }
  CHECK(tsig_verify(nullptr, 0, k, request.mac, now()).status == Status::invalid);
}

TEST_CASE("tsig signed UPDATE and query of the step carry a verifiable TSIG", "[dns][tsig]") {
  const TsigKey k = key("hmac-sha224", kSha224Secret);
  fo::config::DnsStep step;
  step.zone = "failover.test.";
  step.record = "www.failover.test.";
  step.type = "A";
  step.ttl = 60;
  const auto update = fo::actions::dns::build_update(step, {"198.51.100.20"}, &k);
  REQUIRE(update.error.empty());
  CHECK(update.signed_with_tsig);
  CHECK(tsig_verify(update.wire.data(), update.wire.size(), k, {}, now()).status ==
        Status::verified);
  const auto soa = fo::actions::dns::build_query("failover.test.", "SOA", &k);
  REQUIRE(soa.error.empty());
  CHECK(tsig_verify(soa.wire.data(), soa.wire.size(), k, {}, now()).status == Status::verified);
  const auto unsigned_query = fo::actions::dns::build_query("failover.test.", "SOA", nullptr);
  CHECK_FALSE(unsigned_query.signed_with_tsig);
  CHECK(unsigned_query.mac.empty());
}

TEST_CASE("tsig read_reply of the step accepts only a reply signed for its request",
          "[dns][tsig]") {
  using fo::actions::dns::read_reply;
  const TsigKey k = key("hmac-sha384", kSha384Secret);
  const auto request = fo::actions::dns::build_query("failover.test.", "SOA", &k);
  REQUIRE(request.error.empty());

  const auto good = tsig_sign(reply_wire(request.id), k, now(), request.mac);
  auto r = read_reply(request, good.wire.data(), good.wire.size(), &k);
  CHECK(r.parsed);
  CHECK(r.tsig_verified);
  CHECK(r.soa_serial == 7);
  CHECK(r.tsig_problem.empty());

  const auto forged =
      tsig_sign(reply_wire(request.id), key("hmac-sha384", fo::test::dns::kSha384WrongSecret),
                now(), request.mac);
  r = read_reply(request, forged.wire.data(), forged.wire.size(), &k);
  CHECK(r.parsed);
  CHECK_FALSE(r.tsig_verified);
  CHECK(r.tsig_problem == "the MAC does not match (BADSIG)");

  const auto plain = reply_wire(request.id);
  r = read_reply(request, plain.data(), plain.size(), &k);
  CHECK_FALSE(r.tsig_verified);
  CHECK(r.tsig_problem == "it is not signed");

  // A BADKEY answer as BIND sends it: the error field set, no MAC.
  auto badkey = tsig_sign(reply_wire(request.id), k, now(), request.mac, 17);
  r = read_reply(request, badkey.wire.data(), badkey.wire.size(), &k);
  CHECK_FALSE(r.tsig_verified);
  CHECK(r.tsig_error == "BADKEY");
}
