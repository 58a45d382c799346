// Errors: no C++ exception crosses the plugin ABI. Plugin code throws Error
// for what it detects itself; the entry points in plugin.cc catch everything
// and turn it into a plait_result_t plus a message with the helpers below.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "peers.h"
#include "plait/dtypes.h"  // plait_result_name_inline: no libplait to call
#include "plait/plait.h"
#include "state.h"

namespace plait_gloo {

// A failure detected by the plugin itself (a bad argument, a kernel error).
// It is thrown before any communication or after a collective completed on
// every rank, so it never leaves the ranks out of step.
class Error : public std::runtime_error {
 public:
  Error(plait_result_t code, const std::string &message)
      : std::runtime_error(message), code_(code) {}
  plait_result_t code() const { return code_; }

 private:
  plait_result_t code_;
};

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void fail(plait_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Throws PLAIT_ERR_INVALID_ARGUMENT with the message when cond is false.
#define PLAIT_GLOO_REQUIRE(cond, ...)                                         \
  do {                                                                        \
    if (!(cond)) ::plait_gloo::fail(PLAIT_ERR_INVALID_ARGUMENT, __VA_ARGS__); \
  } while (0)

struct Failure {
  plait_result_t code;
  std::string message;
  bool breaks_context;  // the ranks may be out of step afterwards
};

// Only inside a catch block: classifies the exception in flight. `op` names
// the operation ("allreduce"); peers (from State::peer_addresses, may be
// empty) let a gloo message that names an address name the rank instead.
Failure classify_current_exception(const char *op, const PeerAddresses &peers,
                                   double timeout_s);

// Only inside a catch block: classifies the exception in flight, records the
// message in s.last_error (and marks s broken when it must) and returns the
// code.
plait_result_t capture_exception(State &s, const char *op);

}  // namespace plait_gloo
