// TSIG signing and verification (see tsig.hpp).
#include "actions/dns/tsig.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <cstring>

#include "probes/dns/ldns_util.hpp"

namespace fo::actions::dns {
namespace {

using probes::dns::MallocPtr;
using probes::dns::RdfPtr;
using probes::dns::RrPtr;

constexpr std::size_t kHeaderSize = 12;
constexpr uint16_t kClassAny = 255;

const EVP_MD* digest_of(std::string_view algorithm) {
  if (algorithm == "hmac-md5") return EVP_md5();
  if (algorithm == "hmac-sha1") return EVP_sha1();
  if (algorithm == "hmac-sha224") return EVP_sha224();
  if (algorithm == "hmac-sha256") return EVP_sha256();
  if (algorithm == "hmac-sha384") return EVP_sha384();
  if (algorithm == "hmac-sha512") return EVP_sha512();
  return nullptr;
}

// The decoded secret, wiped when it goes out of scope.
class SecretBytes {
 public:
  explicit SecretBytes(const std::string& base64) {
    if (base64.empty() || base64.size() % 4 != 0) return;
    bytes_.resize(base64.size() / 4 * 3);
    const int n =
        EVP_DecodeBlock(bytes_.data(), reinterpret_cast<const unsigned char*>(base64.data()),
                        static_cast<int>(base64.size()));
    if (n < 0) {
      wipe();
      return;
    }
    // EVP_DecodeBlock decodes '=' padding as zero bytes.
    std::size_t pad = 0;
    for (auto it = base64.rbegin(); it != base64.rend() && *it == '='; ++it) ++pad;
    bytes_.resize(static_cast<std::size_t>(n) - pad);
  }
  ~SecretBytes() { wipe(); }
  SecretBytes(const SecretBytes&) = delete;
  SecretBytes& operator=(const SecretBytes&) = delete;
  bool empty() const { return bytes_.empty(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  void wipe() {
    if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
    bytes_.clear();
  }
  std::vector<uint8_t> bytes_;
};

void put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}
void put32(std::vector<uint8_t>& out, uint32_t v) {
  put16(out, static_cast<uint16_t>(v >> 16));
  put16(out, static_cast<uint16_t>(v));
}
void put48(std::vector<uint8_t>& out, uint64_t v) {
  put16(out, static_cast<uint16_t>(v >> 32));
  put32(out, static_cast<uint32_t>(v));
}
uint16_t get16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
void append(std::vector<uint8_t>& out, const ldns_rdf* rdf) {
  out.insert(out.end(), ldns_rdf_data(rdf), ldns_rdf_data(rdf) + ldns_rdf_size(rdf));
}

// An absolute, lower-case domain name (RFC 8945 4.3.3 digests names in canonical form).
RdfPtr canonical_name(const std::string& text) {
  std::string absolute = text;
  if (absolute.empty() || absolute.back() != '.') absolute += '.';
  RdfPtr name(ldns_dname_new_frm_str(absolute.c_str()));
  if (name) ldns_dname2canonical(name.get());
  return name;
}

// RFC 8945 4.3.3: the TSIG variables that follow the message in the digest.
struct Variables {
  uint64_t time_signed = 0;
  uint16_t fudge = kTsigFudge;
  uint16_t error = 0;
  std::vector<uint8_t> other;
};

std::vector<uint8_t> digest_input(const std::vector<uint8_t>& request_mac, const uint8_t* message,
                                  std::size_t message_len, const ldns_rdf* key_name,
                                  const ldns_rdf* algorithm, const Variables& v) {
  std::vector<uint8_t> in;
  in.reserve(message_len + 2 + request_mac.size() + 600);
  if (!request_mac.empty()) {
    put16(in, static_cast<uint16_t>(request_mac.size()));
    in.insert(in.end(), request_mac.begin(), request_mac.end());
  }
  in.insert(in.end(), message, message + message_len);
  append(in, key_name);
  put16(in, kClassAny);
  put32(in, 0);  // TTL
  append(in, algorithm);
  put48(in, v.time_signed);
  put16(in, v.fudge);
  put16(in, v.error);
  put16(in, static_cast<uint16_t>(v.other.size()));
  in.insert(in.end(), v.other.begin(), v.other.end());
  return in;
}

bool push_rdf(ldns_rr* rr, ldns_rdf* rdf) {
  if (!rdf) return false;
  if (!ldns_rr_push_rdf(rr, rdf)) {
    ldns_rdf_deep_free(rdf);
    return false;
  }
  return true;
}

// Length-prefixed data (MAC, Other Data): ldns keeps the 16-bit length inside the rdf.
ldns_rdf* int16_data(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> raw;
  put16(raw, static_cast<uint16_t>(data.size()));
  raw.insert(raw.end(), data.begin(), data.end());
  return ldns_rdf_new_frm_data(LDNS_RDF_TYPE_INT16_DATA, raw.size(), raw.data());
}

// The inverse of int16_data; false when the rdf's length prefix disagrees with its size.
bool read_int16_data(const ldns_rdf* rdf, std::vector<uint8_t>& out) {
  const std::size_t size = ldns_rdf_size(rdf);
  if (size < 2) return false;
  const uint8_t* p = ldns_rdf_data(rdf);
  if (get16(p) != size - 2) return false;
  out.assign(p + 2, p + size);
  return true;
}

TsigVerdict invalid(std::string why) {
  TsigVerdict v;
  v.status = TsigVerdict::Status::invalid;
  v.problem = std::move(why);
  return v;
}

}  // namespace

std::vector<uint8_t> tsig_hmac(std::string_view algorithm, const std::vector<uint8_t>& key,
                               const std::vector<uint8_t>& data) {
  const EVP_MD* md = digest_of(algorithm);
  if (!md) return {};
  std::array<uint8_t, EVP_MAX_MD_SIZE> mac{};
  unsigned int size = 0;
  static const uint8_t kNoKey = 0;
  if (!HMAC(md, key.empty() ? &kNoKey : key.data(), static_cast<int>(key.size()), data.data(),
            data.size(), mac.data(), &size))
    return {};
  return std::vector<uint8_t>(mac.begin(), mac.begin() + size);
}

TsigSigned tsig_sign(const std::vector<uint8_t>& message, const TsigKey& key,
                     std::uint64_t time_signed, const std::vector<uint8_t>& request_mac,
                     uint16_t error) {
  TsigSigned out;
  auto fail = [&](std::string why) {
    out.error = "cannot sign with TSIG key '" + key.name + "': " + why;
    return out;
  };
  if (message.size() < kHeaderSize) return fail("message too short");
  if (get16(&message[10]) == 0xffff) return fail("additional section full");
  if (!digest_of(key.algorithm)) return fail("unknown algorithm " + key.algorithm);
  const SecretBytes secret(key.secret);
  if (secret.empty()) return fail("the secret is not valid base64");
  RdfPtr key_name = canonical_name(key.name);
  RdfPtr algorithm = canonical_name(key.algorithm_name);
  if (!key_name || !algorithm) return fail("invalid key or algorithm name");

  Variables v;
  v.time_signed = time_signed;
  v.error = error;
  // RFC 8945 5.2.3: a BADTIME reply tells the client the server's time.
  if (error == 18) put48(v.other, time_signed);
  std::vector<uint8_t> input =
      digest_input(request_mac, message.data(), message.size(), key_name.get(), algorithm.get(), v);
  out.mac = tsig_hmac(key.algorithm, secret.bytes(), input);
  OPENSSL_cleanse(input.data(), input.size());
  if (out.mac.empty()) return fail("HMAC failed");

  RrPtr rr(ldns_rr_new());
  if (!rr) return fail("out of memory");
  ldns_rr_set_owner(rr.get(), key_name.release());
  ldns_rr_set_type(rr.get(), LDNS_RR_TYPE_TSIG);
  ldns_rr_set_class(rr.get(), static_cast<ldns_rr_class>(kClassAny));
  ldns_rr_set_ttl(rr.get(), 0);
  std::vector<uint8_t> time48;
  put48(time48, time_signed);
  const bool built =
      push_rdf(rr.get(), algorithm.release()) &&
      push_rdf(rr.get(), ldns_rdf_new_frm_data(LDNS_RDF_TYPE_TSIGTIME, 6, time48.data())) &&
      push_rdf(rr.get(), ldns_native2rdf_int16(LDNS_RDF_TYPE_INT16, v.fudge)) &&
      push_rdf(rr.get(), int16_data(out.mac)) &&
      push_rdf(rr.get(), ldns_native2rdf_int16(LDNS_RDF_TYPE_INT16, get16(message.data()))) &&
      push_rdf(rr.get(), ldns_native2rdf_int16(LDNS_RDF_TYPE_INT16, error)) &&
      push_rdf(rr.get(), int16_data(v.other));
  if (!built) return fail("out of memory");
  // Encoded on its own (no name compression against the message), then appended: the MAC
  // covers exactly the bytes that are sent.
  uint8_t* raw = nullptr;
  std::size_t size = 0;
  if (ldns_rr2wire(&raw, rr.get(), LDNS_SECTION_ADDITIONAL, &size) != LDNS_STATUS_OK || !raw)
    return fail("cannot encode the TSIG record");
  MallocPtr<uint8_t> encoded(raw);
  out.wire = message;
  out.wire.insert(out.wire.end(), raw, raw + size);
  const uint16_t arcount = static_cast<uint16_t>(get16(&message[10]) + 1);
  out.wire[10] = static_cast<uint8_t>(arcount >> 8);
  out.wire[11] = static_cast<uint8_t>(arcount);
  return out;
}

TsigVerdict tsig_verify(const uint8_t* data, std::size_t len, const TsigKey& key,
                        const std::vector<uint8_t>& request_mac, std::uint64_t now) {
  if (!data || len < kHeaderSize) return invalid("message too short");
  // Walk the message with ldns to find where the last record starts: the MAC covers
  // everything before it, byte for byte as received (names stay compressed as they were).
  const std::size_t questions = get16(data + 4);
  const std::size_t records =
      std::size_t{get16(data + 6)} + std::size_t{get16(data + 8)} + std::size_t{get16(data + 10)};
  std::size_t pos = kHeaderSize;
  for (std::size_t i = 0; i < questions; ++i) {
    ldns_rr* q = nullptr;
    if (ldns_wire2rr(&q, data, len, &pos, LDNS_SECTION_QUESTION) != LDNS_STATUS_OK)
      return invalid("malformed question section");
    ldns_rr_free(q);
  }
  if (get16(data + 10) == 0) {
    TsigVerdict v;
    v.status = TsigVerdict::Status::unsigned_message;
    return v;
  }
  std::size_t tsig_start = pos;
  RrPtr tsig;
  for (std::size_t i = 0; i < records; ++i) {
    tsig_start = pos;
    ldns_rr* rr = nullptr;
    if (ldns_wire2rr(&rr, data, len, &pos, LDNS_SECTION_ADDITIONAL) != LDNS_STATUS_OK)
      return invalid("malformed record section");
    RrPtr owned(rr);
    const bool last = i + 1 == records;
    if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_TSIG && !last)
      return invalid("TSIG record is not the last record");
    if (last) tsig = std::move(owned);
  }
  if (!tsig || ldns_rr_get_type(tsig.get()) != LDNS_RR_TYPE_TSIG) {
    TsigVerdict v;
    v.status = TsigVerdict::Status::unsigned_message;
    return v;
  }
  if (pos != len) return invalid("data after the TSIG record");

  RdfPtr want_name = canonical_name(key.name);
  RdfPtr want_algorithm = canonical_name(key.algorithm_name);
  if (!want_name || !want_algorithm) return invalid("invalid key or algorithm name");
  const ldns_rr* t = tsig.get();
  if (ldns_rr_rd_count(t) != 7 || ldns_rdf_size(ldns_rr_rdf(t, 1)) != 6 ||
      ldns_rdf_size(ldns_rr_rdf(t, 2)) != 2 || ldns_rdf_size(ldns_rr_rdf(t, 4)) != 2 ||
      ldns_rdf_size(ldns_rr_rdf(t, 5)) != 2 ||
      ldns_rdf_get_type(ldns_rr_rdf(t, 0)) != LDNS_RDF_TYPE_DNAME)
    return invalid("malformed TSIG record");
  if (ldns_rr_get_class(t) != static_cast<ldns_rr_class>(kClassAny) || ldns_rr_ttl(t) != 0)
    return invalid("malformed TSIG record (class or TTL)");
  if (ldns_dname_compare(ldns_rr_owner(t), want_name.get()) != 0)
    return invalid("signed with another key");
  if (ldns_dname_compare(ldns_rr_rdf(t, 0), want_algorithm.get()) != 0)
    return invalid("signed with another algorithm");
  std::vector<uint8_t> mac;
  Variables v;
  if (!read_int16_data(ldns_rr_rdf(t, 3), mac) || !read_int16_data(ldns_rr_rdf(t, 6), v.other))
    return invalid("malformed TSIG record (MAC or other data)");
  const uint8_t* time48 = ldns_rdf_data(ldns_rr_rdf(t, 1));
  v.time_signed = uint64_t{get16(time48)} << 32 | uint64_t{get16(time48 + 2)} << 16 |
                  uint64_t{get16(time48 + 4)};
  v.fudge = ldns_rdf2native_int16(ldns_rr_rdf(t, 2));
  const uint16_t original_id = ldns_rdf2native_int16(ldns_rr_rdf(t, 4));
  v.error = ldns_rdf2native_int16(ldns_rr_rdf(t, 5));
  if (v.error != 0) {
    // BADSIG and BADKEY replies cannot be signed (RFC 8945 5.3.2), so the error is reported as
    // received; the step stops either way.
    TsigVerdict out;
    out.status = TsigVerdict::Status::server_error;
    out.error = v.error;
    return out;
  }
  const EVP_MD* md = digest_of(key.algorithm);
  if (!md) return invalid("unknown algorithm " + key.algorithm);
  // We never ask for truncated MACs (RFC 8945 5.2.2.1), so a shorter one is refused.
  if (mac.size() != static_cast<std::size_t>(EVP_MD_get_size(md)))
    return invalid("MAC of " + std::to_string(mac.size()) + " bytes, expected " +
                   std::to_string(EVP_MD_get_size(md)));

  // The message as signed: the original ID, and ARCOUNT without the TSIG record.
  std::vector<uint8_t> message(data, data + tsig_start);
  message[0] = static_cast<uint8_t>(original_id >> 8);
  message[1] = static_cast<uint8_t>(original_id);
  const uint16_t arcount = static_cast<uint16_t>(get16(data + 10) - 1);
  message[10] = static_cast<uint8_t>(arcount >> 8);
  message[11] = static_cast<uint8_t>(arcount);
  const SecretBytes secret(key.secret);
  if (secret.empty()) return invalid("the secret is not valid base64");
  std::vector<uint8_t> input = digest_input(request_mac, message.data(), message.size(),
                                            want_name.get(), want_algorithm.get(), v);
  const std::vector<uint8_t> expected = tsig_hmac(key.algorithm, secret.bytes(), input);
  if (expected.size() != mac.size() || CRYPTO_memcmp(expected.data(), mac.data(), mac.size()) != 0)
    return invalid("the MAC does not match (BADSIG)");
  // RFC 8945 5.2.3: time is checked after the MAC, so only an authentic time is judged.
  const uint64_t skew = now > v.time_signed ? now - v.time_signed : v.time_signed - now;
  if (skew > v.fudge)
    return invalid("signed " + std::to_string(skew) + " s away from our clock (fudge " +
                   std::to_string(v.fudge) + " s): check both clocks (BADTIME)");
  TsigVerdict out;
  out.status = TsigVerdict::Status::verified;
  return out;
}

std::string tsig_error_name(uint16_t error) {
  switch (error) {
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
      return "error " + std::to_string(error);
  }
}

}  // namespace fo::actions::dns
