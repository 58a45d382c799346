#include "errors.h"

#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include <cstdarg>
#include <cstdio>
#include <new>

#include "log.h"
#include "peers.h"

namespace plait_gloo {

static std::string vformat(const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n < 0) return fmt;
  std::string out((size_t)n + 1, '\0');
  std::vsnprintf(&out[0], out.size(), fmt, ap);
  out.resize((size_t)n);
  return out;
}

std::string format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string out = vformat(fmt, ap);
  va_end(ap);
  return out;
}

void fail(plait_result_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  throw Error(code, msg);
}

static bool mentions_timeout(const std::string &text) {
  return text.find("imed out") != std::string::npos ||
         text.find("imeout") != std::string::npos;
}

// gloo::IoException and gloo's own timeouts: a peer died, closed its
// connection, or stayed silent for longer than the timeout.
static Failure peer_failure(const char *op, const std::string &text,
                            const PeerAddresses &peers, double timeout_s) {
  int peer = find_peer_rank(peers, text);
  bool timeout = mentions_timeout(text);
  std::string msg;
  if (peer >= 0 && timeout)
    msg = format(
        "%s: rank %d (at %s) timed out after %g s (PLAIT_TIMEOUT_S)",
        op, peer, listening_address(peers, peer).c_str(), timeout_s);
  else if (peer >= 0)
    msg = format("%s: lost the connection to rank %d (at %s)", op,
                 peer, listening_address(peers, peer).c_str());
  else if (timeout)
    msg = format(
        "%s: timed out after %g s (PLAIT_TIMEOUT_S) waiting for a "
        "peer rank, which died, hung or is unreachable",
        op, timeout_s);
  else
    msg = format("%s: lost the connection to a peer rank", op);
  return {PLAIT_ERR_PEER_LOST, msg + " [gloo: " + text + "]", true};
}

Failure classify_current_exception(const char *op, const PeerAddresses &peers,
                                   double timeout_s) {
  try {
    throw;
  } catch (const Error &e) {
    return {e.code(), e.what(), false};
  } catch (const gloo::IoException &e) {
    return peer_failure(op, e.what(), peers, timeout_s);
  } catch (const gloo::EnforceNotMet &e) {
    // gloo checks its invariants this way, timeouts of some waits included.
    std::string text = e.what();
    if (mentions_timeout(text)) return peer_failure(op, text, peers, timeout_s);
    return {PLAIT_ERR_TRANSPORT,
            format("%s: gloo check failed: %s", op, text.c_str()), true};
  } catch (const gloo::Exception &e) {
    return {PLAIT_ERR_TRANSPORT, format("%s: gloo failed: %s", op, e.what()),
            true};
  } catch (const std::bad_alloc &) {
    return {PLAIT_ERR_NO_MEMORY, format("%s: out of memory", op), true};
  } catch (const std::exception &e) {
    return {PLAIT_ERR_TRANSPORT, format("%s: %s", op, e.what()), true};
  } catch (...) {
    return {PLAIT_ERR_INTERNAL, format("%s: unknown C++ exception", op), true};
  }
}

plait_result_t capture_exception(State &s, const char *op) {
  Failure f = classify_current_exception(op, s.peer_addresses, s.timeout_s);
  s.last_error = f.message;
  if (f.breaks_context) {
    s.broken = f.code;
    s.broken_message = f.message;
    // Once per context: later calls fail fast without logging again.
    PLAIT_GLOO_WARN(s, "%s", f.message.c_str());
  }
  return f.code;
}

}  // namespace plait_gloo
