// libcurl multi on sd-event (see curl_multi.hpp). Pattern and pitfalls: RECIPES.md §10.3.
#include "daemon/platform/curl_multi.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace fo::platform {
namespace {

// The kick must run before the epoll source fires again (it is level triggered); at equal or
// lower priority a busy set could delay the timeouts and posted calls it carries.
constexpr int64_t kKickPriority = SD_EVENT_PRIORITY_NORMAL - 1;
// Ready sockets handed to curl per wake-up; more stay ready in the set for the next iteration.
constexpr std::size_t kMaxEventsPerWake = 256;

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

int select_bits(uint32_t revents) {
  int mask = 0;
  if (revents & EPOLLIN) mask |= CURL_CSELECT_IN;
  if (revents & EPOLLOUT) mask |= CURL_CSELECT_OUT;
  if (revents & (EPOLLERR | EPOLLHUP)) mask |= CURL_CSELECT_ERR;
  return mask;
}

}  // namespace

CurlMulti::CurlMulti(sd_event* event)
    : event_(sd_event_ref(event)), epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
  static const GlobalInit global_init;  // once per process, before any other curl call
  if (epoll_.get() < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  batch_.resize(kMaxEventsPerWake);
  pool_.reserve(kMaxPooledHandles);  // so returning a handle never allocates
  multi_.reset(curl_multi_init());
  if (!multi_) throw std::runtime_error("curl_multi_init failed");
  curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETFUNCTION, &CurlMulti::on_curl_socket);
  curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_.get(), CURLMOPT_TIMERFUNCTION, &CurlMulti::on_curl_timer);
  curl_multi_setopt(multi_.get(), CURLMOPT_TIMERDATA, this);
  sd_event_source* src = nullptr;
  const int rc = sd_event_add_io(event, &src, epoll_.get(), EPOLLIN, &CurlMulti::on_epoll, this);
  if (rc < 0) throw std::system_error(-rc, std::generic_category(), "sd_event_add_io(epoll)");
  epoll_io_.reset(src);
  timer_ = std::make_unique<Timer>(event, [this] {
    timeout_due_ = true;
    kick_->schedule();
  });
  kick_ = std::make_unique<Defer>(
      event, [this] { run_pending(false); }, kKickPriority);
}

CurlMulti::~CurlMulti() {
  if (destroyed_) *destroyed_ = true;
  cancel_all();
  // curl_multi_cleanup closes cached connections and reports them through on_curl_socket, so
  // the epoll set and the timer must still exist while it runs.
  curl_multi_cleanup(multi_.release());
  sockets_.clear();
  pool_.clear();
  epoll_io_.reset();
  kick_.reset();
  timer_.reset();
}

CURL* CurlMulti::take_easy() {
  if (pool_.empty()) return curl_easy_init();
  CURL* easy = pool_.back().release();
  pool_.pop_back();
  return easy;
}

void CurlMulti::add(CURL* easy, Done done, AfterDone after) {
  if (easy && transfers_.count(easy)) throw std::logic_error("CurlMulti::add: handle added twice");
  // Signals belong to the loop (signalfd); curl must not install handlers or use alarm().
  if (easy) curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  if (easy && curl_multi_add_handle(multi_.get(), easy) == CURLM_OK) {
    transfers_.emplace(easy, Transfer{std::move(done), after});
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
  for (auto& [easy, transfer] : transfers) {
    curl_multi_remove_handle(multi_.get(), easy);
    curl_easy_cleanup(easy);
  }
  // `transfers` (the callbacks and whatever they captured) goes only now, after the handles
  // that may point into that captured state.
}

int CurlMulti::on_curl_socket(CURL*, curl_socket_t fd, int what, void* userp, void* socketp) {
  auto* self = static_cast<CurlMulti*>(userp);
  if (what == CURL_POLL_REMOVE) {
    self->unwatch(fd);
    return 0;
  }
  uint32_t events = 0;
  if (what & CURL_POLL_IN) events |= EPOLLIN;
  if (what & CURL_POLL_OUT) events |= EPOLLOUT;
  // curl hands back what we assigned: null means a socket it has not announced before, even if
  // the number is one we still remember.
  const bool fresh = socketp == nullptr;
  if (!self->watch(fd, events, fresh)) return -1;
  if (fresh) curl_multi_assign(self->multi_.get(), fd, self);
  return 0;
}

bool CurlMulti::watch(curl_socket_t fd, uint32_t events, bool fresh) {
  auto [it, inserted] = sockets_.try_emplace(fd, 0U);
  const uint32_t before = (fresh || inserted) ? 0U : it->second;
  if (!fresh && !inserted && before == events) return true;
  epoll_event ev{};
  ev.data.fd = fd;
  if (events == 0) {
    // CURL_POLL_NONE: out of the set, since epoll reports ERR/HUP even with no events asked
    // and the socket could spin. ENOENT/EBADF only mean it was not (or no longer) there.
    if ((before != 0 || fresh) && ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, &ev) != 0 &&
        errno != ENOENT && errno != EBADF)
      spdlog::warn("epoll_ctl(DEL, fd {}): {}", fd, std::strerror(errno));
    it->second = 0;
    return true;
  }
  ev.events = events;
  int op = before != 0 ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  if (::epoll_ctl(epoll_.get(), op, fd, &ev) != 0) {
    // Our record can be out of date: a socket closed behind our back left the set (MOD gives
    // ENOENT), or a registration of this number is still there (ADD gives EEXIST).
    if ((op == EPOLL_CTL_MOD && errno == ENOENT) || (op == EPOLL_CTL_ADD && errno == EEXIST)) {
      op = op == EPOLL_CTL_MOD ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
      if (::epoll_ctl(epoll_.get(), op, fd, &ev) == 0) {
        it->second = events;
        return true;
      }
    }
    spdlog::error("epoll_ctl(fd {}): {}", fd, std::strerror(errno));
    sockets_.erase(it);
    return false;
  }
  it->second = events;
  return true;
}

void CurlMulti::unwatch(curl_socket_t fd) {
  // A number curl gives up can come back for its next socket within this same wake-up.
  for (std::size_t i = batch_pos_; i < batch_end_; ++i)
    if (batch_[i].data.fd == fd) batch_[i].data.fd = -1;
  auto it = sockets_.find(fd);
  if (it == sockets_.end()) return;
  // curl reports REMOVE before it closes the fd; if it is gone anyway, so is its registration.
  epoll_event ev{};
  if (it->second != 0 && ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, &ev) != 0 &&
      errno != ENOENT && errno != EBADF)
    spdlog::warn("epoll_ctl(DEL, fd {}): {}", fd, std::strerror(errno));
  sockets_.erase(it);
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

int CurlMulti::on_epoll(sd_event_source*, int, uint32_t, void* userdata) {
  try {
    static_cast<CurlMulti*>(userdata)->run_pending(true);
  } catch (const std::exception& e) {
    spdlog::error("curl socket work failed: {}", e.what());
  }
  return 0;  // a negative value would switch the source off for good
}

void CurlMulti::run_pending(bool sockets) {
  int running = 0;
  if (sockets) {
    const int n =
        ::epoll_wait(epoll_.get(), batch_.data(), static_cast<int>(batch_.size()), /*timeout=*/0);
    if (n < 0 && errno != EINTR) spdlog::error("epoll_wait: {}", std::strerror(errno));
    batch_pos_ = 0;
    batch_end_ = n > 0 ? static_cast<std::size_t>(n) : 0;
    // socket_action calls on_curl_socket only: nothing here can destroy *this.
    while (batch_pos_ < batch_end_) {
      const epoll_event ev = batch_[batch_pos_++];
      if (ev.data.fd < 0) continue;
      curl_multi_socket_action(multi_.get(), ev.data.fd, select_bits(ev.events), &running);
    }
    batch_pos_ = batch_end_ = 0;
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
    Transfer transfer = std::move(it->second);
    transfers_.erase(it);
    curl_multi_remove_handle(multi_.get(), easy);
    // The handle goes before `transfer` (and the state its callback captured) is destroyed.
    if (!invoke_guarded(destroyed_, [&] { transfer.done(result, easy); })) {
      curl_easy_cleanup(easy);
      return false;
    }
    release(easy, transfer.after);
  }
  return true;
}

void CurlMulti::release(CURL* easy, AfterDone after) {
  if (after == AfterDone::reuse && pool_.size() < kMaxPooledHandles) {
    curl_easy_reset(easy);
    pool_.emplace_back(easy);
  } else {
    curl_easy_cleanup(easy);
  }
}

}  // namespace fo::platform
