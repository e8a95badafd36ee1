// libcurl's multi interface driven by sd-event: every transfer runs on the loop thread with no
// blocking and no extra threads. curl's sockets live in a private epoll set whose one fd is the
// only io source sd-event sees, so a wake-up collects every ready socket with one epoll_wait
// (sd-event dispatches one source per iteration: a source per socket made K ready sockets cost
// K iterations, each re-polling all of them). curl's socket/timer callbacks only mark work; the
// work itself (curl_multi_socket_action) runs from the loop, never from inside curl.
#pragma once

#include <curl/curl.h>
#include <sys/epoll.h>
#include <systemd/sd-event.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "daemon/platform/event.hpp"
#include "daemon/platform/unique_fd.hpp"

namespace fo::platform {

class CurlMulti {
 public:
  // Called once per transfer, from the loop, with the transfer's result and its (still valid)
  // easy handle for curl_easy_getinfo. The handle is released after the callback returns.
  using Done = std::function<void(CURLcode, CURL*)>;

  // What happens to an easy handle once its callback has returned.
  enum class AfterDone {
    cleanup,  // curl_easy_cleanup
    // curl_easy_reset and keep it for take_easy() (bounded pool). Only for handles that use no
    // cookies, no CURLOPT_SHARE and no TLS session cache: curl_easy_reset keeps those.
    reuse,
  };

  // Idle easy handles kept for take_easy(); the daemon's default max_concurrent.
  static constexpr std::size_t kMaxPooledHandles = 256;

  explicit CurlMulti(sd_event* event);
  // Aborts transfers still in flight without calling their callbacks.
  ~CurlMulti();
  CurlMulti(const CurlMulti&) = delete;
  CurlMulti& operator=(const CurlMulti&) = delete;

  // An easy handle with every option at its default: a reset one from the pool, else a new one.
  // Owned by the caller until add(); null if curl cannot allocate one.
  CURL* take_easy();

  // Takes ownership of `easy` (configured by the caller; CURLOPT_NOSIGNAL is forced on).
  // Never calls `done` synchronously; if curl refuses the handle (or `easy` is null), `done`
  // gets CURLE_FAILED_INIT on a later iteration. Callbacks may add new transfers, call
  // cancel_all() or destroy this CurlMulti.
  void add(CURL* easy, Done done, AfterDone after = AfterDone::cleanup);

  // Runs `fn` on a later loop iteration (after the completions of that iteration). Dropped by
  // cancel_all() and by destruction.
  void post(std::function<void()> fn);

  // Transfers added and not yet completed (posted calls not counted).
  std::size_t in_flight() const { return transfers_.size(); }
  // Sockets curl currently asks us to watch (for tests and diagnostics).
  std::size_t watched_sockets() const { return sockets_.size(); }
  // Idle handles in the pool.
  std::size_t pooled_handles() const { return pool_.size(); }

  // Aborts everything in flight and drops posted calls; no callback is called (for shutdown).
  void cancel_all();

  sd_event* event() const { return event_.get(); }

 private:
  struct EasyCleanup {
    void operator()(CURL* c) const { curl_easy_cleanup(c); }
  };
  using EasyPtr = std::unique_ptr<CURL, EasyCleanup>;
  struct MultiCleanup {
    void operator()(CURLM* m) const { curl_multi_cleanup(m); }
  };
  struct Transfer {
    Done done;
    AfterDone after = AfterDone::cleanup;
  };

  static int on_curl_socket(CURL* easy, curl_socket_t fd, int what, void* userp, void* socketp);
  static int on_curl_timer(CURLM* multi, long timeout_ms, void* userp);
  static int on_epoll(sd_event_source* s, int fd, uint32_t revents, void* userdata);

  // Returns false on a failed epoll_ctl (curl is told through the callback's -1).
  // `fresh`: curl announces this socket for the first time, whatever we recorded for its number.
  bool watch(curl_socket_t fd, uint32_t events, bool fresh);
  void unwatch(curl_socket_t fd);
  // `sockets`: also hand curl what the epoll set reports (only when it is readable).
  void run_pending(bool sockets);
  // Returns false if a callback destroyed *this.
  bool drain_completed();
  void release(CURL* easy, AfterDone after);

  EventPtr event_;  // a reference, so the loop outlives our sources
  std::unique_ptr<CURLM, MultiCleanup> multi_;
  std::unordered_map<CURL*, Transfer> transfers_;
  std::unordered_map<curl_socket_t, uint32_t> sockets_;  // fd -> epoll events (0: not in the set)
  // Events of the current wake-up not yet handed to curl; an fd curl removes meanwhile is
  // blanked (fd -1), so a reused number never gets its predecessor's events.
  std::vector<epoll_event> batch_;
  std::size_t batch_pos_ = 0;
  std::size_t batch_end_ = 0;
  std::vector<EasyPtr> pool_;
  std::deque<std::function<void()>> posted_;
  bool timeout_due_ = false;
  bool* destroyed_ = nullptr;  // set while callbacks run, so they may destroy *this
  UniqueFd epoll_;
  // Declared last: destroyed first, so none can fire into a half-destroyed object.
  SourcePtr epoll_io_;
  std::unique_ptr<Timer> timer_;
  std::unique_ptr<Defer> kick_;
};

}  // namespace fo::platform
