/*
 * Shared by the device-path suites (test_device_path.c,
 * test_device_failures.c): jobs whose ranks run on the "devsim" test
 * transport (tests/plugins/fixtures/devsim.c: a GPU transport simulated on the host,
 * whose device pointers fault when the core touches them), its helpers
 * (loaded in each rank, from the file the core loads), device buffers, and
 * and hooks for ops_util.h's rank main that check every device allocation is
 * freed by plait_shutdown.
 */
#ifndef PLAIT_TEST_DEVSIM_UTIL_H
#define PLAIT_TEST_DEVSIM_UTIL_H

#define DEVSIM_API_LOADER
#include "../plugins/fixtures/devsim.h"
#include "ops_util.h"

#define DEVSIM_SO PLAIT_TEST_PLUGIN_DIR "/libplait-transport-devsim.so"

static devsim_api_t dv;  /* in each rank, after dv_before loaded it */
static int dv_device;    /* the device index of this rank's tensors */

/* Before plait_init: loads devsim's helpers (the constructor reads the
 * rank's DEVSIM_* env) and picks this rank's device. */
static inline int dv_before(int rank) {
  char err[512];
  if (devsim_api_load(DEVSIM_SO, &dv, err, sizeof err)) {
    plait_test_say(rank, "cannot load devsim's helpers: %s", err);
    return 1;
  }
  const char *d = getenv("DEVSIM_DEVICE");
  dv_device = d && *d ? atoi(d) : rank; /* the harness sets PLAIT_LOCAL_RANK = rank */
  return 0;
}

/* After plait_shutdown: no device allocation may be left (the body frees
 * its own buffers). */
static inline int dv_after(int rank) {
  long live = dv.live_allocations();
  if (live == 0) return 0;
  plait_test_say(rank, "%ld device allocation(s) still live after plait_shutdown", live);
  return 1;
}

/* Runs body on nranks ranks on devsim (PLAIT_TIMEOUT_S=15, then env), each
 * between dv_before, plait_init, plait_shutdown and dv_after. */
static inline int dv_run(int nranks, const char *const *env, double timeout_s, ops_body_fn body,
                         void *arg) {
  return ops_run_hooked(nranks, "PLAIT_TRANSPORT=devsim", env, timeout_s, body, arg, dv_before,
                        dv_after);
}

/* In a Criterion test: skip without the plugins devsim needs. */
#define DV_REQUIRE()                                                           \
  do {                                                                         \
    OPS_REQUIRE_GLOO();                                                        \
    FILE *f_ = fopen(DEVSIM_SO, "rb");                                         \
    if (!f_) cr_skip_test("no " DEVSIM_SO);                                    \
    fclose(f_);                                                                \
  } while (0)

/* A device buffer holding a copy of host[0..bytes); NULL on failure. */
static inline void *dv_upload(const void *host, size_t bytes) {
  void *d = dv.alloc(bytes);
  if (d && dv.to_device(d, host, bytes)) {
    dv.free(d);
    d = NULL;
  }
  return d;
}

/* A 1-D tensor of n elements at device pointer d on this rank's device. */
static inline plait_tensor_t dv_tensor(void *d, size_t n, plait_dtype_t dt) {
  plait_tensor_t t;
  plait_tensor_1d(&t, d, n, dt);
  t.device = dv_device;
  return t;
}

static inline devsim_counters_t dv_counters(void) {
  devsim_counters_t c;
  dv.counters(&c);
  return c;
}

/* Waits up to limit_s for devsim's collective count to reach want. */
static inline int dv_await_collectives(uint64_t want, double limit_s) {
  double until = ops_now() + limit_s;
  while (dv_counters().collectives < want)
    if (ops_now() > until) return 0;
    else ops_sleep(0.002);
  return 1;
}

/* A refusal: the submission (rc) or, when accepted, the operation fails,
 * and the message has every word. 0 when so. */
static inline int dv_refused(int rank, int line, plait_result_t rc, plait_handle_t *h,
                             const char *what, const char *const *words) {
  if (rc == PLAIT_SUCCESS) {
    rc = plait_wait(h, 60);
    plait_release(h);
  }
  const char *msg = plait_last_error();
  if (rc == PLAIT_SUCCESS) {
    plait_test_say(rank, "line %d: %s was not refused", line, what);
    return 1;
  }
  for (int i = 0; words[i]; i++)
    if (!strstr(msg, words[i])) {
      plait_test_say(rank, "line %d: %s: %s, but the message does not say \"%s\": \"%s\"", line,
                     what, plait_result_name(rc), words[i], msg);
      return 1;
    }
  return 0;
}

/* EXPECT_REFUSED("what", call, words...): call may use `&hp`, a handle. */
#define EXPECT_REFUSED(what, call, ...)                                        \
  do {                                                                         \
    const char *w_[] = {__VA_ARGS__, NULL};                                    \
    plait_handle_t *hp = NULL;                                                 \
    plait_result_t rc_ = (call);                                               \
    if (dv_refused(rank, __LINE__, rc_, hp, what, w_)) return 1;               \
  } while (0)

#endif
