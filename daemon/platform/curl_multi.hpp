// libcurl's multi interface driven by sd-event: every transfer runs on the loop thread with no
// blocking and no extra threads. curl's socket/timer callbacks only mark work; the work itself
// (curl_multi_socket_action) runs from a deferred source, so curl is never re-entered.
#pragma once

#include <curl/curl.h>
#include <systemd/sd-event.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

#include "daemon/platform/event.hpp"

namespace fo::platform {

class CurlMulti {
 public:
  // Called once per transfer, from the loop, with the transfer's result and its (still valid)
  // easy handle for curl_easy_getinfo. The handle is cleaned up after the callback returns.
  using Done = std::function<void(CURLcode, CURL*)>;

  explicit CurlMulti(sd_event* event);
  // Aborts transfers still in flight without calling their callbacks.
  ~CurlMulti();
  CurlMulti(const CurlMulti&) = delete;
  CurlMulti& operator=(const CurlMulti&) = delete;

  // Takes ownership of `easy` (configured by the caller; CURLOPT_NOSIGNAL is forced on).
  // Never calls `done` synchronously; if curl refuses the handle (or `easy` is null), `done`
  // gets CURLE_FAILED_INIT on a later iteration. Callbacks may add new transfers, call
  // cancel_all() or destroy this CurlMulti.
  void add(CURL* easy, Done done);

  // Runs `fn` on a later loop iteration (after the completions of that iteration). Dropped by
  // cancel_all() and by destruction.
  void post(std::function<void()> fn);

  // Transfers added and not yet completed (posted calls not counted).
  std::size_t in_flight() const { return transfers_.size(); }

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
  struct Socket {
    CurlMulti* owner = nullptr;
    curl_socket_t fd = CURL_SOCKET_BAD;
    SourcePtr io;
  };

  static int on_curl_socket(CURL* easy, curl_socket_t fd, int what, void* userp, void* socketp);
  static int on_curl_timer(CURLM* multi, long timeout_ms, void* userp);
  static int on_io(sd_event_source* s, int fd, uint32_t revents, void* userdata);

  void run_pending();
  // Returns false if a callback destroyed *this.
  bool drain_completed();
  void remove_socket(curl_socket_t fd);

  EventPtr event_;  // a reference, so the loop outlives our sources
  std::unique_ptr<CURLM, MultiCleanup> multi_;
  std::unordered_map<CURL*, Done> transfers_;
  std::unordered_map<curl_socket_t, std::unique_ptr<Socket>> sockets_;
  std::map<curl_socket_t, int> ready_;  // fd -> CURL_CSELECT_* bits seen since the last run
  std::deque<std::function<void()>> posted_;
  bool timeout_due_ = false;
  bool* destroyed_ = nullptr;  // set while callbacks run, so they may destroy *this
  // Declared last: destroyed first, so neither can fire into a half-destroyed object.
  std::unique_ptr<Timer> timer_;
  std::unique_ptr<Defer> kick_;
};

}  // namespace fo::platform
