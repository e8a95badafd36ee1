// Signal mask set-up for the sd-event loop (see signals.hpp).
#include "daemon/platform/signals.hpp"

#include <pthread.h>

#include <system_error>

namespace fo::platform {

sigset_t loop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&set, sig);
  return set;
}

void block_signals_for_loop() {
  const sigset_t set = loop_signals();
  // pthread_sigmask returns the error number instead of setting errno.
  if (int err = pthread_sigmask(SIG_BLOCK, &set, nullptr); err != 0)
    throw std::system_error(err, std::generic_category(), "pthread_sigmask");
}

}  // namespace fo::platform
