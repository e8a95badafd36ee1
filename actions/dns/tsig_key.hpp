// TSIG keys in BIND key-file format (`key "name" { algorithm hmac-sha256; secret "..."; };`, as
// written by tsig-keygen), parsed from a secret file's content. Errors never quote the secret.
#pragma once

#include <string>
#include <string_view>

namespace fo::actions::dns {

struct TsigKey {
  std::string name;            // as written in the file: "feas-key"
  std::string algorithm;       // lower case, no trailing dot: "hmac-sha256"
  std::string algorithm_name;  // its domain name on the wire: "hmac-sha256."
  std::string secret;          // base64, as in the file
};

struct TsigKeyParse {
  bool ok = false;
  TsigKey key;
  std::string error;  // "expected 'secret' ...", never containing the secret
};

// Exactly one `key` statement; comments (#, //, /* */) allowed. Algorithms: hmac-md5,
// hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384, hmac-sha512 (RFC 8945 section 6).
TsigKeyParse parse_tsig_key(std::string_view text);

}  // namespace fo::actions::dns
