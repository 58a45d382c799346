// gloo's TCP transport writes with writev(2), which raises SIGPIPE when the
// peer has gone; the default action would kill this rank instead of letting
// it report PLAIT_ERR_PEER_LOST. Rather than ignore SIGPIPE for the whole
// process (the application's choice), the plugin blocks it in the calling
// thread for the duration of each call, and discards a SIGPIPE raised
// meanwhile. gloo's event-loop thread is created inside init under this
// guard and so inherits the blocked mask for its whole life.
#pragma once

#include <pthread.h>

#include <csignal>
#include <ctime>

namespace plait_gloo {

class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    active_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~SigpipeGuard() {
    if (!active_) return;
    if (!sigismember(&old_, SIGPIPE)) {
      // Consume what was raised while blocked (standard signals do not
      // queue: at most one for the thread and one for the process).
      for (int i = 0; i < 2; i++) {
        sigset_t pending;
        if (sigpending(&pending) != 0 || !sigismember(&pending, SIGPIPE)) break;
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard &) = delete;
  SigpipeGuard &operator=(const SigpipeGuard &) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool active_ = false;
};

}  // namespace plait_gloo
