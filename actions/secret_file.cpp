// Secret files (see secret_file.hpp).
#include "actions/secret_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace fo::actions {

namespace {

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

SecretRead read_secret_file(const std::string& path, std::size_t max_bytes) {
  SecretRead out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    out.error = "cannot open secret file " + path + ": " + std::strerror(errno);
    return out;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    out.error = "cannot stat secret file " + path + ": " + std::strerror(errno);
    ::close(fd);
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    out.error = "secret file " + path + " is not a regular file";
  } else if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    out.error = "secret file " + path + " is accessible by others (mode " + mode_text(st.st_mode) +
                "); refusing it: chmod o-rwx it";
  } else if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    out.error = "secret file " + path + " is larger than " + std::to_string(max_bytes) + " bytes";
  }
  if (!out.error.empty()) {
    ::close(fd);
    return out;
  }
  std::string data;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.error = "cannot read secret file " + path + ": " + std::strerror(errno);
      ::close(fd);
      return out;
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    if (data.size() > max_bytes) {
      out.error = "secret file " + path + " is larger than " + std::to_string(max_bytes) + " bytes";
      ::close(fd);
      return out;
    }
  }
  ::close(fd);
  while (!data.empty() && (data.back() == '\n' || data.back() == '\r')) data.pop_back();
  if (data.empty()) {
    out.error = "secret file " + path + " is empty";
    return out;
  }
  out.ok = true;
  out.value = std::move(data);
  return out;
}

}  // namespace fo::actions
