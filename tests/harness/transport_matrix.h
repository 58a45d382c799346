/*
 * The multi-rank matrix every transport plugin must pass, shared by
 * tests/plugins/gloo/test_gloo_collectives.c and tests/plugins/ofi/test_ofi_collectives.c:
 * forked ranks that plait_init() with PLAIT_TRANSPORT set and then call the
 * plugin's collectives directly (through plait_core_transport()), checking
 * exact results. Sizes 0, 1, odd and not divisible by the rank count (1001,
 * 4097), and 8 MiB for a subset; every dtype and op.
 *
 * Data are small integers, so that every reduction is exact in every dtype
 * (float16 and bfloat16 included) and the expected value can be computed in
 * double.
 */
#ifndef PLAIT_TEST_TRANSPORT_MATRIX_H
#define PLAIT_TEST_TRANSPORT_MATRIX_H

#include <stddef.h>

#include "plait/transport.h"
#include "ranks.h"

typedef struct tm_ctx {
  int rank, nranks;
  const plait_transport_t *t;
  void *st;
} tm_ctx_t;

/* What each rank runs between plait_init and plait_shutdown; 0 = passed. */
typedef int (*tm_body_fn)(tm_ctx_t *c);

int tm_allreduce(tm_ctx_t *c);     /* every dtype x op x {0, 1, 1001, 4097}, 8 MiB x4;
                                      allreduce_scaled against allreduce + scale */
int tm_allgatherv(tm_ctx_t *c);    /* parts with zeros, units of 1-8 bytes, 8 MiB */
int tm_broadcast(tm_ctx_t *c);     /* every root x {0, 1, 1001, 32776, 8 MiB} */
int tm_alltoallv(tm_ctx_t *c);     /* unequal splits with zero blocks, 8 MiB */
int tm_reducescatter(tm_ctx_t *c); /* every dtype x op, uneven counts, 8 MiB */
int tm_barrier(tm_ctx_t *c);       /* 20 barriers */
int tm_errors(tm_ctx_t *c);        /* argument errors, caps, memory functions */
/* allreduce_spans (a plugin that has it) against allreduce_scaled of the
 * packed data, bit for bit: span layouts x dtypes x ops x postscale, in and
 * out of place (transport_spans.c); part of tm_allreduce */
int tm_allreduce_spans(tm_ctx_t *c);
/* One allreduce_spans over n spans of counts[] elements, checked so (layout
 * names them in messages): every other span out of place (its src must
 * stay as it was), the rest in place. 0 = passed. */
int tm_spans_one(tm_ctx_t *c, plait_dtype_t d, plait_op_t op, double post, const size_t *counts,
                 size_t n, const char *layout);
int tm_everything(tm_ctx_t *c);    /* all of the above in one job */
/* subset(): overlapping and disjoint subsets, a subset of a subset, traffic
 * on them interleaved with the job's, argument errors (transport_subsets.c) */
int tm_subsets(tm_ctx_t *c);

/* One allreduce of count elements, checked; 0 = passed. */
int tm_allreduce_one(tm_ctx_t *c, plait_dtype_t d, plait_op_t op, size_t count);

/* Fills / checks a buffer the way tm_allreduce does (offset: index of the
 * first element). check returns the index of the first wrong element or -1. */
void tm_fill(plait_dtype_t d, plait_op_t op, int rank, int nranks, void *buf, size_t count,
             size_t offset);
long tm_check(plait_dtype_t d, plait_op_t op, int nranks, const void *buf, size_t count,
              size_t offset);

#define TM_PASSED 0
#define TM_FAILED 1
#define TM_SKIPPED 2 /* the transport cannot start here: reason given */

/*
 * Runs body on nranks forked ranks with PLAIT_TRANSPORT=transport,
 * PLAIT_TIMEOUT_S=15 (so a rank that fails makes the others fail soon) and
 * the extra NULL-terminated "NAME=value" list. TM_SKIPPED when a rank's
 * plait_init failed with PLAIT_ERR_UNSUPPORTED (the plugin says it cannot
 * start here); the message is copied to reason.
 */
int tm_run(const char *transport, int nranks, tm_body_fn body, const char *const *env,
           char *reason, size_t reason_len);

/* How the last rank is lost in tm_run_lost_rank. */
typedef enum {
  TM_KILLED_BETWEEN_OPS,
  TM_KILLED_MID_ALLREDUCE,
  TM_HUNG,
  TM_KILLED_MID_SPANS /* as MID_ALLREDUCE, with allreduce_spans over 256 spans */
} tm_loss_t;

#define TM_PEER_TIMEOUT_S 5

/*
 * The last rank is lost after one allreduce: killed (SIGKILL: no shutdown)
 * before or during the next one, or hung past PLAIT_TIMEOUT_S=5. The
 * survivors' allreduce must fail with PLAIT_ERR_PEER_LOST within 3x the
 * timeout and every later one fail at once. job->exit_code[] and status[]
 * tell the caller what each rank did. TM_SKIPPED as for tm_run.
 */
int tm_run_lost_rank(const char *transport, int nranks, tm_loss_t how, const char *const *env,
                     plait_test_job_t *job, char *reason, size_t reason_len);

/* What that job must show: every survivor exited 0; the lost rank exited 0
 * (hung, then released) or died of SIGKILL. 0, or -1 with what went wrong in
 * why. */
int tm_check_lost_rank(const plait_test_job_t *job, int nranks, tm_loss_t how, char *why,
                       size_t why_len);

#endif
