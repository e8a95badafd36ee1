// TSIG keys in BIND key-file format (`key "name" { algorithm hmac-sha256; secret "..."; };`, as
// written by tsig-keygen), parsed from a secret file's content. Errors never quote the secret.
#pragma once

#include <string>
#include <string_view>

namespace fo::actions::dns {

struct TsigKey {
  std::string name;            // as written in the file: "feas-key"
  std::string algorithm;       // as written, lower case: "hmac-sha256"
  std::string ldns_algorithm;  // ldns' name of it: "hmac-sha256."
  std::string secret;          // base64, as in the file
};

struct TsigKeyParse {
  bool ok = false;
  TsigKey key;
  std::string error;  // "expected 'secret' ...", never containing the secret
};

// Exactly one `key` statement; comments (#, //, /* */) allowed. Algorithms: hmac-md5,
// hmac-sha1, hmac-sha256, hmac-sha512. hmac-sha224 and hmac-sha384 are refused with a clear
// error: ldns 1.8.3 cannot sign with them.
TsigKeyParse parse_tsig_key(std::string_view text);

}  // namespace fo::actions::dns
