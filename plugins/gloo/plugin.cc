// The exported table plait_transport_v2 and its C entry points. Every entry
// point catches every exception and turns it into a plait_result_t plus a
// message that last_error() returns: no C++ exception crosses the ABI.
#include <string>
#include <vector>

#include "errors.h"
#include "ops.h"
#include "sigpipe.h"
#include "state.h"
#include "subset.h"

using plait_gloo::State;

namespace {

// Message of the last init failure (or call with a NULL state) on this
// thread: last_error(NULL).
thread_local std::string t_thread_error;

plait_result_t null_state(const char *what) {
  t_thread_error = std::string(what) + ": state is NULL";
  return PLAIT_ERR_INVALID_ARGUMENT;
}

// A collective: fails fast once the context is broken; gloo's writes may
// raise SIGPIPE on a lost peer, which must not kill the rank.
template <typename Fn>
plait_result_t collective(void *state, const char *what, Fn &&fn) {
  if (state == nullptr) return null_state(what);
  State &s = *static_cast<State *>(state);
  if (s.broken != PLAIT_SUCCESS) {
    s.last_error = std::string(what) +
                   ": the gloo context failed earlier and cannot be used: " +
                   s.broken_message;
    return s.broken;
  }
  plait_gloo::SigpipeGuard guard;
  try {
    fn(s);
    return PLAIT_SUCCESS;
  } catch (...) {
    return plait_gloo::capture_exception(s, what);
  }
}

// Memory functions: local, usable even after the context broke.
template <typename Fn>
plait_result_t local(void *state, const char *what, Fn &&fn) {
  if (state == nullptr) return null_state(what);
  State &s = *static_cast<State *>(state);
  try {
    fn();
    return PLAIT_SUCCESS;
  } catch (...) {
    return plait_gloo::capture_exception(s, what);
  }
}

}  // namespace

extern "C" {

static plait_result_t gloo_init(const plait_transport_init_args_t *args,
                                void **state) {
  if (state == nullptr) {
    t_thread_error = "init: state is NULL";
    return PLAIT_ERR_INVALID_ARGUMENT;
  }
  double timeout_s =
      args != nullptr && args->size >= PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1
          ? args->timeout_s
          : 0;
  plait_gloo::PeerAddresses peers;
  // Also makes gloo's event-loop thread, started here, block SIGPIPE.
  plait_gloo::SigpipeGuard guard;
  try {
    *state = plait_gloo::start(args, peers);
    return PLAIT_SUCCESS;
  } catch (...) {
    plait_gloo::Failure f =
        plait_gloo::classify_current_exception("init", peers, timeout_s);
    t_thread_error = f.message;
    return f.code;
  }
}

static plait_result_t gloo_finalize(void *state) {
  plait_gloo::SigpipeGuard guard;
  plait_gloo::stop(static_cast<State *>(state));
  return PLAIT_SUCCESS;
}

static const char *gloo_last_error(void *state) {
  if (state == nullptr) return t_thread_error.c_str();
  return static_cast<State *>(state)->last_error.c_str();
}

// The ABI's one allreduce: gloo takes one span, in place, unscaled (its
// allreduce_flags are 0), so the core copies and scales around it.
static plait_result_t gloo_allreduce(void *state, const plait_span_t *spans,
                                     size_t n, plait_dtype_t dtype,
                                     plait_op_t op, double prescale,
                                     double postscale) {
  return collective(state, "allreduce", [&](State &s) {
    PLAIT_GLOO_REQUIRE(spans && n == 1,
                       "allreduce: %zu spans; the gloo transport takes one "
                       "(its allreduce_flags have no PLAIT_ALLREDUCE_SPANS)",
                       spans ? n : (size_t)0);
    PLAIT_GLOO_REQUIRE(spans[0].src == spans[0].dst && prescale == 1.0 &&
                           postscale == 1.0,
                       "allreduce: out of place or scaled (prescale %g, "
                       "postscale %g); the gloo transport reduces in place "
                       "(its allreduce_flags have no PLAIT_ALLREDUCE_SCALED)",
                       prescale, postscale);
    plait_gloo::allreduce(s, spans[0].dst, spans[0].count, dtype, op);
  });
}

static plait_result_t gloo_allgatherv(void *state, void *buf,
                                      const size_t *bytes) {
  return collective(state, "allgatherv",
                    [&](State &s) { plait_gloo::allgatherv(s, buf, bytes); });
}

static plait_result_t gloo_broadcast(void *state, void *buf, size_t bytes,
                                     int root) {
  return collective(state, "broadcast", [&](State &s) {
    plait_gloo::broadcast(s, buf, bytes, root);
  });
}

static plait_result_t gloo_alltoallv(void *state, const void *send,
                                     const size_t *send_bytes, void *recv,
                                     const size_t *recv_bytes) {
  return collective(state, "alltoallv", [&](State &s) {
    plait_gloo::alltoallv(s, send, send_bytes, recv, recv_bytes);
  });
}

static plait_result_t gloo_reducescatter(void *state, const void *send,
                                         void *recv, const size_t *counts,
                                         plait_dtype_t dtype, plait_op_t op) {
  return collective(state, "reducescatter", [&](State &s) {
    plait_gloo::reducescatter(s, send, recv, counts, dtype, op);
  });
}

static plait_result_t gloo_barrier(void *state) {
  return collective(state, "barrier",
                    [&](State &s) { plait_gloo::barrier(s); });
}

static plait_result_t gloo_mem_alloc(void *state, size_t bytes, void **ptr) {
  return local(state, "mem_alloc", [&] { plait_gloo::mem_alloc(bytes, ptr); });
}

static plait_result_t gloo_mem_free(void *state, void *ptr) {
  return local(state, "mem_free", [&] { plait_gloo::mem_free(ptr); });
}

// What runs underneath: gloo::allreduce's default (ring), and this plugin's
// own reducescatter; gloo does not say for the others.
static const char *gloo_algorithm(void *, uint64_t collective, uint64_t) {
  switch (collective) {
  case PLAIT_CAP_ALLREDUCE: return "ring (gloo)";
  case PLAIT_CAP_REDUCESCATTER: return "alltoallv + local reduction";
  default: return nullptr;
  }
}

static plait_result_t gloo_subset(void *state, const int *ranks, int n,
                                  void **sub) {
  if (sub == nullptr) {
    if (state != nullptr)
      static_cast<State *>(state)->last_error = "subset: sub is NULL";
    return PLAIT_ERR_INVALID_ARGUMENT;
  }
  *sub = nullptr;
  return collective(state, "subset", [&](State &s) {
    *sub = plait_gloo::subset(s, ranks, n);
  });
}

static plait_result_t gloo_mem_copy(void *state, void *dst, const void *src,
                                    size_t bytes, plait_copy_kind_t kind) {
  return local(state, "mem_copy",
               [&] { plait_gloo::mem_copy(dst, src, bytes, kind); });
}


// The one exported symbol (with -fvisibility=hidden and exports.map).
#define PLAIT_GLOO_EXPORT __attribute__((visibility("default")))
PLAIT_GLOO_EXPORT extern const plait_transport_t plait_transport_v2;

const plait_transport_t plait_transport_v2 = {
    /* abi_version */ PLAIT_TRANSPORT_ABI_VERSION,
    /* struct_size */ sizeof(plait_transport_t),
    /* name */ "gloo",
    /* caps */ PLAIT_CAP_HOST_MEMORY | PLAIT_CAP_ALLREDUCE |
        PLAIT_CAP_ALLGATHERV | PLAIT_CAP_BROADCAST | PLAIT_CAP_ALLTOALLV |
        PLAIT_CAP_REDUCESCATTER | PLAIT_CAP_BARRIER,
    /* dtypes */ PLAIT_DTYPE_MASK_ALL,
    /* ops */ PLAIT_OP_MASK_ALL,
    // Not folded: gloo's ring calls the reduction kernel without saying
    // which call is a segment's last, and copies an input into the output
    // itself before reducing, so the core's one scaling pass stays (see
    // docs/transport-gloo.md).
    /* allreduce_flags */ 0,
    // Second in PLAIT_TRANSPORT=auto: it starts wherever it loads, so it is
    // the fallback behind ofi (place 10).
    /* auto_place */ 20,
    // Fusion pays over Gloo for the 2-9 MiB layers too (plait-bench fusion
    // over bench/mixes): the configuration's defaults stand.
    /* fusion_piece */ 0,
    /* fusion_max_tensor */ 0,
    /* init */ gloo_init,
    /* finalize */ gloo_finalize,
    /* last_error */ gloo_last_error,
    /* allreduce */ gloo_allreduce,
    /* allgatherv */ gloo_allgatherv,
    /* broadcast */ gloo_broadcast,
    /* alltoallv */ gloo_alltoallv,
    /* reducescatter */ gloo_reducescatter,
    /* barrier */ gloo_barrier,
    /* mem_alloc */ gloo_mem_alloc,
    /* mem_free */ gloo_mem_free,
    /* mem_copy */ gloo_mem_copy,
    /* algorithm */ gloo_algorithm,
    /* subset */ gloo_subset,
    /* probe: none, Gloo starts wherever its plugin loads */ nullptr,
    /* device, batch_copy, ready, notify, interrupt: host memory only, and
     * every call blocks until done */
    nullptr, nullptr, nullptr, nullptr, nullptr,
    /* vote: none (a Gloo collective cannot be left and taken up again): the
     * core agrees with a blocking allreduce */
    nullptr,
    /* vote_allreduce: none, for the same reason: the core runs the vote,
     * then the round's allreduce */
    nullptr,
};

}  // extern "C"
