// Secrets (TSIG keys, API tokens, bearer tokens) are read from files, never from the config
// itself. A file that others can read is refused: the secret may already have leaked, and a
// daemon that quietly accepts it teaches operators that it is fine.
#pragma once

#include <cstddef>
#include <string>

namespace fo::actions {

struct SecretRead {
  bool ok = false;
  std::string value;  // the file's content (trailing newlines removed); empty unless ok
  std::string error;  // "/etc/x.key is readable by others (mode 0644); chmod o-rwx it"
};

inline constexpr std::size_t kMaxSecretBytes = 64 * 1024;

// Reads `path`: must be a regular file (symlinks are followed), not readable or writable by
// others, at most kMaxSecretBytes. The error names the path but never any content.
SecretRead read_secret_file(const std::string& path, std::size_t max_bytes = kMaxSecretBytes);

}  // namespace fo::actions
