// Signal mask set-up for the sd-event loop.
#pragma once

#include <signal.h>

namespace fo::platform {

// SIGTERM, SIGINT, SIGHUP, SIGCHLD.
sigset_t loop_signals();

// Blocks loop_signals() in the calling thread. Call it in main() BEFORE any thread exists:
// sd-event's signal and child sources read these signals from a signalfd, which only works
// while they are blocked in every thread; a thread created earlier keeps its own mask, the
// kernel may deliver SIGTERM to it and the default action kills the daemon (seen with MHD's
// thread in RECIPES.md §10.4). Threads inherit the mask, so later threads are covered.
// Children inherit it across exec too: spawn code must restore the mask in the child
// (posix_spawnattr_setsigmask with an empty set). Throws std::system_error on failure.
void block_signals_for_loop();

}  // namespace fo::platform
