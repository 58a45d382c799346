// Holding gloo's event-loop thread still for a moment.
//
// gloo's TCP device runs one thread that waits in epoll and calls each
// registered descriptor's handler; a pair's handler accepts whatever connects
// to the pair's listening socket. While a LoopPause is held that thread waits
// inside a handler of ours, so no other handler runs: a pair can be created
// and its listening socket taken away from gloo before gloo's loop ever looks
// at it (handover.cc).
//
// Threads: made, released and destroyed by one thread, never the loop thread.
// While it is held, do not call anything that waits for a loop tick
// (Device::unregisterDescriptor, a pair's destructor): it would wait forever.
#pragma once

#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>

#include <condition_variable>
#include <mutex>

namespace plait_gloo {

class LoopPause : private ::gloo::transport::tcp::Handler {
 public:
  // Returns once the loop thread waits in this object's handler. Throws Error
  // (PLAIT_ERR_SYSTEM, PLAIT_ERR_TRANSPORT) if it cannot be paused within
  // timeout_s; nothing is left registered then.
  LoopPause(::gloo::transport::tcp::Device &dev, double timeout_s);
  ~LoopPause() override;  // release() if not done; never throws
  LoopPause(const LoopPause &) = delete;
  LoopPause &operator=(const LoopPause &) = delete;

  // Lets the loop thread go on and removes this object's descriptor (which
  // waits for one loop tick). Harmless a second time.
  void release() noexcept;

 private:
  void handleEvents(int events) override;  // on the loop thread

  ::gloo::transport::tcp::Device &dev_;
  int efd_ = -1;
  std::mutex m_;
  std::condition_variable cv_;
  bool want_ = false;    // the owner asks the loop thread to wait
  bool parked_ = false;  // the loop thread waits in handleEvents
  bool done_ = false;    // released
};

}  // namespace plait_gloo
