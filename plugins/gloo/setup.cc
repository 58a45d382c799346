// init and finalize: a gloo TCP device on the control-plane address and a
// context whose pairs run on plait's own authenticated links (links.h,
// handover.h): gloo never accepts a connection itself.
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "errors.h"
#include "log.h"
#include "ops.h"
#include "peers.h"
#include "handover.h"
#include "links.h"

#include <unistd.h>  // environ

#if !GLOO_HAVE_TRANSPORT_TCP
#error "the plait gloo plugin needs gloo's TCP transport"
#endif

namespace plait_gloo {

static void check_init_args(const plait_transport_init_args_t *a) {
  PLAIT_GLOO_REQUIRE(a != nullptr, "init: args is NULL");
  PLAIT_GLOO_REQUIRE(a->size >= PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1,
                     "init: args->size is %zu, less than %zu, the first layout "
                     "of plait_transport_init_args_t",
                     a->size, PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1);
  PLAIT_GLOO_REQUIRE(a->nranks >= 1 && a->rank >= 0 && a->rank < a->nranks,
                     "init: rank %d is not in [0, nranks = %d)", a->rank,
                     a->nranks);
  PLAIT_GLOO_REQUIRE(a->reduce != nullptr, "init: args->reduce is NULL");
  PLAIT_GLOO_REQUIRE(a->divide != nullptr, "init: args->divide is NULL");
  if (a->nranks == 1) return;
  const plait_bootstrap_t *b = a->bootstrap;
  PLAIT_GLOO_REQUIRE(b != nullptr, "init: args->bootstrap is NULL");
  PLAIT_GLOO_REQUIRE(b->size >= PLAIT_BOOTSTRAP_SIZE_V1,
                     "init: bootstrap->size is %zu, less than %zu, the first "
                     "layout of plait_bootstrap_t",
                     b->size, PLAIT_BOOTSTRAP_SIZE_V1);
  PLAIT_GLOO_REQUIRE(b->allgather != nullptr,
                     "init: bootstrap->allgather is NULL");
  PLAIT_GLOO_REQUIRE(b->rank == a->rank && b->nranks == a->nranks,
                     "init: bootstrap is rank %d of %d, args say %d of %d",
                     b->rank, b->nranks, a->rank, a->nranks);
  PLAIT_GLOO_REQUIRE(a->host_address != nullptr && a->host_address[0] != '\0',
                     "init: args->host_address is empty");
}

// PLAIT_TIMEOUT_S as gloo takes it; <= 0 (or not a number) means none.
static std::chrono::milliseconds gloo_timeout(double seconds) {
  if (!(seconds > 0)) return gloo::kNoTimeout;
  double ms = std::ceil(seconds * 1000.0);
  if (ms > 1e15) ms = 1e15;
  return std::chrono::milliseconds((long long)ms);
}

static std::shared_ptr<gloo::transport::Device> make_device(const char *host) {
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception &e) {
    fail(PLAIT_ERR_TRANSPORT,
         "init: cannot create a gloo TCP device on host_address '%s': %s", host,
         e.what());
  }
}

static void connect(State &s, const plait_transport_init_args_t &a) {
  auto start = std::chrono::steady_clock::now();
  Links links;
  open_links(bootstrap_allgather(a.bootstrap), s.rank, s.nranks, a.host_address,
             s.timeout_s, LinkLog{s.log, s.log_level}, links);
  s.device = make_device(a.host_address);
  auto context = std::make_shared<LinkedContext>(s.rank, s.nranks);
  context->setTimeout(gloo_timeout(s.timeout_s));
  context->connect(s.device, links, s.peer_addresses,
                   HandoverOptions{LinkLog{s.log, s.log_level}, nullptr, nullptr});
  s.context = context;
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  PLAIT_GLOO_DEBUG(s,
                   "rank %d of %d: TCP device %s, connected to %d peers over "
                   "plait's own links in %.1f ms, timeout %g s",
                   s.rank, s.nranks, s.device->str().c_str(), s.nranks - 1, ms,
                   s.timeout_s);
  if (s.log != nullptr && PLAIT_LOG_TRACE >= s.log_level)
    for (int r = 0; r < s.nranks; r++)
      if (r != s.rank)
        PLAIT_GLOO_LOG(s.log, s.log_level, PLAIT_LOG_TRACE,
                       "rank %d is linked from %s (gloo's messages name it %s)", r,
                       s.peer_addresses[(size_t)r].listening.c_str(),
                       s.peer_addresses[(size_t)r].gloo_names.empty()
                           ? "?"
                           : s.peer_addresses[(size_t)r].gloo_names[0].c_str());
}

// The gloo plugin reads no PLAIT_GLOO_* variable (the core leaves that
// prefix to it): any that is set is a typo or meant for another build.
static void report_unknown_variables(const State &s) {
  std::string names;
  for (char **e = environ; e != nullptr && *e != nullptr; e++) {
    if (std::strncmp(*e, "PLAIT_GLOO_", 11) != 0) continue;
    if (!names.empty()) names += ", ";
    names.append(*e, std::strcspn(*e, "="));
  }
  if (!names.empty())
    PLAIT_GLOO_WARN(s,
                    "unknown variable(s) ignored: %s (the gloo plugin reads no "
                    "PLAIT_GLOO_* variable; it uses PLAIT_TIMEOUT_S)",
                    names.c_str());
}

State *start(const plait_transport_init_args_t *args, PeerAddresses &peers) {
  check_init_args(args);
  auto s = std::make_unique<State>();
  s->rank = args->rank;
  s->nranks = args->nranks;
  s->timeout_s = args->timeout_s;
  s->log = args->log;
  s->log_level = args->log_level;
  s->reduce = args->reduce;
  s->divide = args->divide;
  if (args->host_address != nullptr) s->host_address = args->host_address;
  s->peer_addresses.resize((size_t)s->nranks);
  report_unknown_variables(*s);
  if (s->nranks > 1) {
    if (!(s->timeout_s > 0))
      PLAIT_GLOO_WARN(*s,
                      "timeout_s is %g: gloo operations will never time "
                      "out",
                      s->timeout_s);
    try {
      connect(*s, *args);
    } catch (...) {
      peers = s->peer_addresses;  // what is known names a lost rank
      throw;
    }
  } else {
    PLAIT_GLOO_DEBUG(*s,
                     "a job of one rank: no gloo device, every "
                     "collective is local");
  }
  return s.release();
}

void stop(State *s) noexcept {
  if (s == nullptr) return;
  try {
    s->context.reset();  // closes the pairs
    s->device.reset();   // stops gloo's event loop thread
  } catch (...) {
    // finalize never fails the job
  }
  delete s;
}

}  // namespace plait_gloo
