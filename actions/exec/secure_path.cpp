// Ownership and permission walk over an executable's path (see secure_path.hpp).
#include "actions/exec/secure_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace fo::actions {
namespace {

std::string writable_by(mode_t mode) {
  const bool group = (mode & S_IWGRP) != 0;
  const bool other = (mode & S_IWOTH) != 0;
  if (group && other) return "group and others";
  return group ? "group" : "others";
}

// Every prefix of an absolute path: "/", "/a", "/a/b" for "/a/b/c" (the last one excluded).
std::vector<std::string> parent_dirs(const std::string& path) {
  std::vector<std::string> dirs{"/"};
  std::string prefix;
  std::size_t pos = 1;
  while (pos < path.size()) {
    std::size_t slash = path.find('/', pos);
    if (slash == std::string::npos) break;  // the rest is the final component
    if (slash > pos) {
      prefix += "/" + path.substr(pos, slash - pos);
      dirs.push_back(prefix);
    }
    pos = slash + 1;
  }
  return dirs;
}

std::string check_owner(const std::string& what, const struct stat& st, uid_t euid) {
  if (st.st_uid != 0 && st.st_uid != euid) {
    return what + " is owned by uid " + std::to_string(st.st_uid);
  }
  return {};
}

std::string check_dir(const std::string& dir, uid_t euid) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    return "directory " + dir + " cannot be examined: " + std::strerror(errno);
  }
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  if (auto bad = check_owner("directory " + dir, st, euid); !bad.empty()) return bad;
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return "directory " + dir + " is writable by " + writable_by(st.st_mode);
  }
  return {};
}

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

}  // namespace

ExecutableCheck check_executable(const std::string& path, uid_t euid) {
  ExecutableCheck out;
  auto refuse = [&](std::string reason) {
    out.reason = std::move(reason);
    return out;
  };
  if (path.empty() || path.front() != '/') return refuse(path + " is not an absolute path");
  if (path.size() >= PATH_MAX) return refuse("path is too long");

  std::unique_ptr<char, FreeDeleter> real(realpath(path.c_str(), nullptr));
  if (!real) {
    if (errno == ENOENT || errno == ENOTDIR) return refuse(path + " does not exist");
    return refuse(path + " cannot be resolved: " + std::strerror(errno));
  }
  const std::string resolved = real.get();
  // Lexical parents matter too: a symlink sitting in a writable directory could be swapped
  // to point at any root-owned binary.
  for (const auto& dir : parent_dirs(path)) {
    if (auto bad = check_dir(dir, euid); !bad.empty()) return refuse(bad);
  }
  if (resolved != path) {
    for (const auto& dir : parent_dirs(resolved)) {
      if (auto bad = check_dir(dir, euid); !bad.empty()) return refuse(bad);
    }
  }

  const std::string name = resolved == path ? path : path + " (-> " + resolved + ")";
  struct stat st {};
  if (stat(resolved.c_str(), &st) != 0) {
    return refuse(name + " cannot be examined: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return refuse(name + " is not a regular file");
  if ((st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) == 0) return refuse(name + " is not executable");
  if (auto bad = check_owner(name, st, euid); !bad.empty()) return refuse(bad);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return refuse(name + " is writable by " + writable_by(st.st_mode));
  }
  if (access(resolved.c_str(), X_OK) != 0) {
    return refuse(name + " is not executable: " + std::strerror(errno));
  }
  out.ok = true;
  out.resolved = resolved;
  return out;
}

}  // namespace fo::actions
