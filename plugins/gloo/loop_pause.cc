#include "loop_pause.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>

#include "errors.h"

namespace plait_gloo {

LoopPause::LoopPause(::gloo::transport::tcp::Device &dev, double timeout_s) : dev_(dev) {
  efd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd_ < 0)
    fail(PLAIT_ERR_SYSTEM, "init: eventfd() to pause gloo's event loop: %s",
         std::strerror(errno));
  try {
    dev_.registerDescriptor(efd_, EPOLLIN, this);
  } catch (const std::exception &e) {
    close(efd_);
    fail(PLAIT_ERR_TRANSPORT, "init: cannot register with gloo's event loop: %s", e.what());
  }
  std::unique_lock<std::mutex> lock(m_);
  want_ = true;
  uint64_t one = 1;
  if (write(efd_, &one, sizeof one) != (ssize_t)sizeof one) {
    int e = errno;
    lock.unlock();
    release();
    fail(PLAIT_ERR_SYSTEM, "init: cannot wake gloo's event loop: %s", std::strerror(e));
  }
  if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return parked_; })) {
    lock.unlock();
    release();
    fail(PLAIT_ERR_TRANSPORT, "init: gloo's event loop did not answer within %g s", timeout_s);
  }
}

LoopPause::~LoopPause() { release(); }

void LoopPause::release() noexcept {
  {
    std::lock_guard<std::mutex> lock(m_);
    if (done_) return;
    done_ = true;
    want_ = false;
  }
  cv_.notify_all();
  try {
    dev_.unregisterDescriptor(efd_, this);  // waits for the loop to tick
  } catch (...) {
    // the descriptor is closed below, which removes it from epoll anyway
  }
  close(efd_);
  efd_ = -1;
}

void LoopPause::handleEvents(int) {
  uint64_t count;
  while (read(efd_, &count, sizeof count) > 0) {
  }  // level-triggered: drained, or the loop would call again at once
  std::unique_lock<std::mutex> lock(m_);
  if (!want_) return;
  parked_ = true;
  cv_.notify_all();
  cv_.wait(lock, [this] { return !want_; });
  parked_ = false;
}

}  // namespace plait_gloo
