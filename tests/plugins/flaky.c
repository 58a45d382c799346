/*
 * "flaky": a real transport whose allreduce fails on one live rank, for the
 * blame tests (tests/mp/test_transport_blame.c). Environment, read when
 * the plugin is loaded: FLAKY_INNER, the real plugin's file (its table is
 * this one's, with its own name); FLAKY_RANK, the rank that fails;
 * FLAKY_AT, which of that rank's allreduce calls fails (1 is the first).
 * The failing call runs the real collective first, so every other rank's
 * collective completes: the failure is that rank's alone, and every rank is
 * alive. It returns PLAIT_ERR_TRANSPORT with a message that says so.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "plait/transport.h"

__attribute__((visibility("default"))) plait_transport_t plait_transport_v2;

static plait_transport_t inner;
static int rank = -1, bad_rank = -1;
static long at, calls;
static char why[160];

static plait_result_t flaky_init(const plait_transport_init_args_t *a, void **state) {
  rank = a->rank;
  calls = 0;
  why[0] = '\0';
  return inner.init(a, state);
}

static const char *flaky_last_error(void *state) {
  return why[0] ? why : inner.last_error(state);
}

/* rc, or the injected failure when this is the call that fails. */
static plait_result_t outcome(plait_result_t rc) {
  if (rc != PLAIT_SUCCESS || rank != bad_rank || ++calls != at) return rc;
  snprintf(why, sizeof why, "flaky: allreduce call %ld on rank %d failed on purpose", calls, rank);
  return PLAIT_ERR_TRANSPORT;
}

static plait_result_t flaky_allreduce(void *state, const plait_span_t *spans, size_t n,
                                      plait_dtype_t dtype, plait_op_t op, double prescale,
                                      double postscale) {
  return outcome(inner.allreduce(state, spans, n, dtype, op, prescale, postscale));
}

/* Loaded with the library: the core reads the table after dlopen returns.
 * Without FLAKY_INNER the table stays zero, which the loader refuses. */
__attribute__((constructor)) static void flaky_load(void) {
  const char *file = getenv("FLAKY_INNER"), *r = getenv("FLAKY_RANK"), *n = getenv("FLAKY_AT");
  void *lib = file ? dlopen(file, RTLD_NOW | RTLD_LOCAL) : NULL;
  const plait_transport_t *t = lib ? dlsym(lib, PLAIT_TRANSPORT_SYMBOL) : NULL;
  if (!t) return;
  inner = *t;
  bad_rank = r ? atoi(r) : 0;
  at = n ? atol(n) : 1;
  plait_transport_v2 = *t;
  plait_transport_v2.name = "flaky";
  plait_transport_v2.auto_place = 0; /* only by name: never chosen by auto */
  plait_transport_v2.init = flaky_init;
  plait_transport_v2.last_error = flaky_last_error;
  plait_transport_v2.allreduce = flaky_allreduce;
}
