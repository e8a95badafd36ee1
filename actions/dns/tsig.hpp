// TSIG (RFC 8945) for the dns step: signs a DNS message and verifies a signed reply, for every
// algorithm a key file may name (hmac-md5, -sha1, -sha224, -sha256, -sha384, -sha512). The TSIG
// record is built and parsed with ldns; the MAC is OpenSSL's HMAC, because ldns 1.8.3 can only
// compute it for md5, sha1, sha256 and sha512 (its "hmac-sha384." lookup is misspelt and it has
// no sha224). One code path for all algorithms, so the BIND tests of any of them test it all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actions/dns/tsig_key.hpp"

namespace fo::actions::dns {

// Seconds of clock difference accepted between signer and verifier (the RFC 8945 default).
inline constexpr uint16_t kTsigFudge = 300;

// HMAC of `data` under `key` (raw bytes) with the algorithm's hash ("hmac-sha384"); empty for
// an algorithm we do not know.
std::vector<uint8_t> tsig_hmac(std::string_view algorithm, const std::vector<uint8_t>& key,
                               const std::vector<uint8_t>& data);

struct TsigSigned {
  std::vector<uint8_t> wire;  // the message with its TSIG record; empty when error is set
  std::vector<uint8_t> mac;   // the raw MAC: a reply's MAC covers it
  std::string error;          // never contains the secret
};

// Appends a TSIG record for `key` to `message` (a complete DNS message without one) and counts
// it in ARCOUNT. A request has no `request_mac`; a reply (tests sign as a server does) covers
// the request's MAC and may carry a TSIG `error` (e.g. 18 BADTIME).
TsigSigned tsig_sign(const std::vector<uint8_t>& message, const TsigKey& key,
                     std::uint64_t time_signed, const std::vector<uint8_t>& request_mac = {},
                     uint16_t error = 0);

struct TsigVerdict {
  enum class Status {
    verified,          // MAC, key, algorithm and time all check out
    unsigned_message,  // no TSIG record at all
    server_error,      // the signer reports a TSIG error (BADSIG/BADKEY replies are unsigned)
    invalid            // malformed, another key or algorithm, wrong MAC, or outside the fudge
  };
  Status status = Status::invalid;
  uint16_t error = 0;   // the TSIG error field (server_error)
  std::string problem;  // invalid: why, for the operator
};

// Verifies the TSIG record that ends `data` against `key`; `request_mac` is the raw MAC of the
// request this answers (empty when `data` is itself a request). `now` is in seconds since the
// epoch. Untrusted input: any byte string gives a verdict, never a crash.
TsigVerdict tsig_verify(const uint8_t* data, std::size_t len, const TsigKey& key,
                        const std::vector<uint8_t>& request_mac, std::uint64_t now);

// "BADSIG", "BADKEY", "BADTIME", "BADTRUNC", "error 20"; "" for 0.
std::string tsig_error_name(uint16_t error);

}  // namespace fo::actions::dns
