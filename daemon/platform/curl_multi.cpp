// libcurl multi on sd-event (see curl_multi.hpp). Pattern and pitfalls: RECIPES.md §10.3.
#include "daemon/platform/curl_multi.hpp"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>

#include <exception>
#include <stdexcept>
#include <utility>

namespace fo::platform {
namespace {

// The kick must run before the io sources that scheduled it fire again (they are level
// triggered); at equal or lower priority a busy socket could starve it.
constexpr int64_t kKickPriority = SD_EVENT_PRIORITY_NORMAL - 1;

struct GlobalInit {
  GlobalInit() {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      throw std::runtime_error("curl_global_init failed");
  }
};

// Runs a user callback; returns false if it destroyed the CurlMulti it was called from.
template <typename Fn>
bool invoke_guarded(bool*& destroyed_slot, Fn&& fn) {
  bool destroyed = false;
  bool* outer = destroyed_slot;
  destroyed_slot = &destroyed;
  try {
    fn();
  } catch (const std::exception& e) {
    spdlog::error("curl completion callback threw: {}", e.what());
  } catch (...) {
    spdlog::error("curl completion callback threw a non-std exception");
  }
  if (destroyed) {
    if (outer) *outer = true;
    return false;
  }
  destroyed_slot = outer;
  return true;
}

}  // namespace

CurlMulti::CurlMulti(sd_event* event) : event_(sd_event_ref(event)) {
  static const GlobalInit global_init;  // once per process, before any other curl call
  multi_.reset(curl_multi_init());
  if (!multi_) throw std::runtime_error("curl_multi_init failed");
  curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETFUNCTION, &CurlMulti::on_curl_socket);
  curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_.get(), CURLMOPT_TIMERFUNCTION, &CurlMulti::on_curl_timer);
  curl_multi_setopt(multi_.get(), CURLMOPT_TIMERDATA, this);
  timer_ = std::make_unique<Timer>(event, [this] {
    timeout_due_ = true;
    kick_->schedule();
  });
  kick_ = std::make_unique<Defer>(
      event, [this] { run_pending(); }, kKickPriority);
}

CurlMulti::~CurlMulti() {
  if (destroyed_) *destroyed_ = true;
  cancel_all();
  // curl_multi_cleanup closes cached connections and reports them through on_curl_socket, so
  // the sockets map and the timer must still exist while it runs.
  curl_multi_cleanup(multi_.release());
  sockets_.clear();
  kick_.reset();
  timer_.reset();
}

void CurlMulti::add(CURL* easy, Done done) {
  if (easy && transfers_.count(easy)) throw std::logic_error("CurlMulti::add: handle added twice");
  // Signals belong to the loop (signalfd); curl must not install handlers or use alarm().
  if (easy) curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  if (easy && curl_multi_add_handle(multi_.get(), easy) == CURLM_OK) {
    transfers_.emplace(easy, std::move(done));
    return;
  }
  std::shared_ptr<CURL> holder(easy, [](CURL* c) {
    if (c) curl_easy_cleanup(c);
  });
  post([holder, done = std::move(done)] { done(CURLE_FAILED_INIT, holder.get()); });
}

void CurlMulti::post(std::function<void()> fn) {
  posted_.push_back(std::move(fn));
  kick_->schedule();
}

void CurlMulti::cancel_all() {
  posted_.clear();
  auto transfers = std::move(transfers_);
  transfers_.clear();
  for (auto& [easy, done] : transfers) {
    curl_multi_remove_handle(multi_.get(), easy);
    curl_easy_cleanup(easy);
  }
  // `transfers` (the callbacks and whatever they captured) goes only now, after the handles
  // that may point into that captured state.
}

int CurlMulti::on_curl_socket(CURL*, curl_socket_t fd, int what, void* userp, void* socketp) {
  auto* self = static_cast<CurlMulti*>(userp);
  auto* sock = static_cast<Socket*>(socketp);
  if (what == CURL_POLL_REMOVE) {
    self->remove_socket(fd);
    return 0;
  }
  uint32_t events = 0;
  if (what & CURL_POLL_IN) events |= EPOLLIN;
  if (what & CURL_POLL_OUT) events |= EPOLLOUT;
  if (!sock) {
    self->remove_socket(fd);  // a stale registration of a reused fd number would make add fail
    auto fresh = std::make_unique<Socket>();
    fresh->owner = self;
    fresh->fd = fd;
    sd_event_source* src = nullptr;
    int rc = sd_event_add_io(self->event_.get(), &src, fd, events, &CurlMulti::on_io, fresh.get());
    if (rc < 0) {
      spdlog::error("sd_event_add_io(fd {}) failed: {}", fd, rc);
      return -1;
    }
    fresh->io.reset(src);
    sock = fresh.get();
    self->sockets_[fd] = std::move(fresh);
    curl_multi_assign(self->multi_.get(), fd, sock);
  } else if (events != 0) {
    sd_event_source_set_io_events(sock->io.get(), events);
  }
  // epoll reports ERR/HUP even with no events requested; a socket curl does not want to watch
  // (CURL_POLL_NONE) is switched off so it cannot spin.
  sd_event_source_set_enabled(sock->io.get(), events != 0 ? SD_EVENT_ON : SD_EVENT_OFF);
  return 0;
}

int CurlMulti::on_curl_timer(CURLM*, long timeout_ms, void* userp) {
  auto* self = static_cast<CurlMulti*>(userp);
  try {
    if (timeout_ms < 0) {
      self->timer_->disarm();
    } else if (timeout_ms == 0) {
      self->timer_->disarm();
      self->timeout_due_ = true;
      self->kick_->schedule();
    } else {
      self->timer_->arm_in(Millis(timeout_ms));
    }
  } catch (const std::exception& e) {
    spdlog::error("arming the curl timer failed: {}", e.what());
    return -1;
  }
  return 0;
}

int CurlMulti::on_io(sd_event_source*, int fd, uint32_t revents, void* userdata) {
  auto* sock = static_cast<Socket*>(userdata);
  int mask = 0;
  if (revents & EPOLLIN) mask |= CURL_CSELECT_IN;
  if (revents & EPOLLOUT) mask |= CURL_CSELECT_OUT;
  if (revents & (EPOLLERR | EPOLLHUP)) mask |= CURL_CSELECT_ERR;
  sock->owner->ready_[fd] |= mask;
  try {
    sock->owner->kick_->schedule();
  } catch (const std::exception& e) {
    spdlog::error("scheduling curl work failed: {}", e.what());
  }
  return 0;
}

void CurlMulti::remove_socket(curl_socket_t fd) {
  ready_.erase(fd);
  auto it = sockets_.find(fd);
  if (it == sockets_.end()) return;
  sockets_.erase(it);  // curl reports REMOVE before closing the fd, so epoll never holds a stale fd
  if (multi_) curl_multi_assign(multi_.get(), fd, nullptr);
}

void CurlMulti::run_pending() {
  int running = 0;
  while (!ready_.empty()) {
    auto [fd, mask] = *ready_.begin();
    ready_.erase(ready_.begin());
    curl_multi_socket_action(multi_.get(), fd, mask, &running);
  }
  if (std::exchange(timeout_due_, false))
    curl_multi_socket_action(multi_.get(), CURL_SOCKET_TIMEOUT, 0, &running);
  if (!drain_completed()) return;
  // Only what was posted before this run; anything posted now waits for the next iteration.
  for (std::size_t n = posted_.size(); n > 0 && !posted_.empty(); --n) {
    auto fn = std::move(posted_.front());
    posted_.pop_front();
    if (!invoke_guarded(destroyed_, fn)) return;
  }
}

bool CurlMulti::drain_completed() {
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_.get(), &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    // msg dies with curl_multi_remove_handle: copy what we need first.
    CURL* easy = msg->easy_handle;
    const CURLcode result = msg->data.result;
    auto it = transfers_.find(easy);
    if (it == transfers_.end()) continue;
    Done done = std::move(it->second);
    transfers_.erase(it);
    curl_multi_remove_handle(multi_.get(), easy);
    EasyPtr owned(easy);  // cleaned up before `done` (and the state it captured) is destroyed
    if (!invoke_guarded(destroyed_, [&] { done(result, easy); })) return false;
  }
  return true;
}

}  // namespace fo::platform
