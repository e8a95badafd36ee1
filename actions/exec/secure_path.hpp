// Security check of an exec hook's executable before it is run (keepalived's
// check_script_secure idea): only root or the daemon's own user may be able to change the
// file or any directory on the way to it, lexically and after resolving symlinks.
#pragma once

#include <sys/types.h>

#include <string>

namespace fo::actions {

struct ExecutableCheck {
  bool ok = false;
  std::string resolved;  // canonical path (symlinks resolved): this is what gets executed
  std::string reason;    // when !ok: "/x is writable by group", "/x does not exist", ...
};

// Checks `path` (must be absolute) for use as an exec hook when running as `euid`.
// Accepted owners are root and `euid`. A directory writable by group/others is accepted only
// with the sticky bit (like /tmp): nobody else can then replace our entries in it.
// The executable itself must be a regular file with an execute bit, not writable by
// group/others. The caller should execute `resolved` rather than `path`, so a symlink
// swapped after the check cannot redirect the exec.
ExecutableCheck check_executable(const std::string& path, uid_t euid);

}  // namespace fo::actions
