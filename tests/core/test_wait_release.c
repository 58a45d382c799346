/*
 * plait_wait_release (plait.h): plait_wait, then plait_release once the
 * operation has finished, in one call (plait.torch's synchronize of an
 * in-place allreduce). On 2 real ranks (tests/harness/ranks.h): while an
 * operation is held in flight (rank 1 has not submitted it) the call answers
 * PLAIT_ERR_TIMEOUT with *released = 0 and the handle stays usable; once it
 * finishes, its result with *released = 1; a failed operation (a shape
 * mismatch) gives its error and message, also released; bad arguments give
 * PLAIT_ERR_INVALID_ARGUMENT naming the argument, with nothing released; an
 * operation polled with timeout 0 that finishes between the wait's look and
 * the release's is answered with its own result, never "still running".
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "plait/plait.h"
#include "failure_helpers.h"
#include "ranks.h"

#define INV PLAIT_ERR_INVALID_ARGUMENT

/* Expects call to return code, *released to be rel and the message to hold w. */
#define EXPECT_WR(call, code, released, rel, w)                                \
  do {                                                                         \
    released = 7;                                                              \
    plait_result_t rc_ = (call);                                               \
    const char *m_ = plait_last_error();                                       \
    if (rc_ != (code) || released != (rel) || !strstr(m_, w))                  \
      FAIL("%s: %s, released %d: \"%s\"; expected %s, released %d, \"%s\"",  \
            #call, plait_result_name(rc_), released, m_,                       \
            plait_result_name(code), rel, w);                                  \
  } while (0)

static void env(void) {
  plait_test_clear_env();
  plait_test_set_plugin_path();
}

TestSuite(wait_release, .init = env);

typedef struct {
  int go[2]; /* pipe: rank 0 tells rank 1 to submit */
} pipe_arg_t;

/* Rank 0: every answer of plait_wait_release on one operation in flight. */
static int held_then_finished(int rank, pipe_arg_t *p) {
  float x[4] = {1, 2, 3, 4};
  plait_tensor_t tx;
  plait_tensor_1d(&tx, x, 4, PLAIT_FLOAT32);
  plait_handle_t *h = NULL;
  int rel;
  EXPECT_OK(plait_allreduce_async("held", &tx, &tx, PLAIT_OP_SUM, NULL, &h));
  /* rank 1 has not submitted 'held': it cannot finish before "go" */
  EXPECT_WR(plait_wait_release(h, 0, &rel), PLAIT_ERR_TIMEOUT, rel, 0, "still running");
  EXPECT_WR(plait_wait_release(h, 0.05, &rel), PLAIT_ERR_TIMEOUT, rel, 0, "still running");
  EXPECT_WR(plait_wait_release(h, NAN, &rel), INV, rel, 0, "NaN");
  EXPECT_WR(plait_wait_release(NULL, 0, &rel), INV, rel, 0, "handle is NULL");
  if (plait_wait_release(h, 0, NULL) != INV || !strstr(plait_last_error(), "released is NULL"))
    FAIL("released NULL: \"%s\"", plait_last_error());
  int done = 5;
  EXPECT_OK(plait_poll(h, &done)); /* still a valid handle */
  if (done != 0) FAIL("finished before rank 1 submitted");
  if (write(p->go[1], "g", 1) != 1) FAIL("write");
  EXPECT_WR(plait_wait_release(h, 30, &rel), PLAIT_SUCCESS, rel, 1, "");
  if (x[0] != 2 || x[3] != 8) FAIL("'held' gave %g..%g", x[0], x[3]);
  /* released: the name is free, and a finished operation answers at once */
  EXPECT_OK(plait_allreduce_async("held", &tx, &tx, PLAIT_OP_SUM, NULL, &h));
  EXPECT_OK(plait_wait(h, 30));
  EXPECT_WR(plait_wait_release(h, 0, &rel), PLAIT_SUCCESS, rel, 1, "");
  if (x[0] != 4) FAIL("second 'held' gave %g", x[0]);
  return 0;
}

/* Both ranks: an operation that fails (rank 1 submits 3 elements, rank 0
 * four) gives its error and message, and is released. */
static int mismatched(int rank) {
  float y[4] = {1, 1, 1, 1};
  plait_tensor_t ty;
  plait_tensor_1d(&ty, y, rank == 0 ? 4 : 3, PLAIT_FLOAT32);
  plait_handle_t *h = NULL;
  int rel;
  EXPECT_OK(plait_allreduce_async("mismatched", &ty, &ty, PLAIT_OP_SUM, NULL, &h));
  EXPECT_WR(plait_wait_release(h, 30, &rel), PLAIT_ERR_MISMATCH, rel, 1, "mismatched");
  return 0;
}

/* Both ranks: operations polled to completion with timeout 0, many times,
 * so that some finish between the wait's look and the release's: every
 * answer with *released = 1 is the operation's own result. */
static int polled(int rank) {
  float z[256];
  plait_tensor_t tz;
  plait_tensor_1d(&tz, z, 256, PLAIT_FLOAT32);
  for (int i = 0; i < 1000; i++) {
    z[0] = 1;
    plait_handle_t *h = NULL;
    int rel = 0;
    plait_result_t rc;
    EXPECT_OK(plait_allreduce_async("polled", &tz, &tz, PLAIT_OP_SUM, NULL, &h));
    do {
      rc = plait_wait_release(h, 0, &rel);
    } while (!rel && rc == PLAIT_ERR_TIMEOUT);
    if (!rel || rc != PLAIT_SUCCESS)
      FAIL("operation %d: %s, released %d: %s", i, plait_result_name(rc), rel,
            plait_last_error());
    if (z[0] != 2) FAIL("operation %d gave %g", i, z[0]);
  }
  return 0;
}

static int rank_main(int rank, int n, void *arg) {
  pipe_arg_t *p = arg;
  (void)n;
  EXPECT_OK(plait_init());
  if (rank == 0) {
    if (held_then_finished(rank, p)) return 1;
  } else {
    char c;
    if (read(p->go[0], &c, 1) != 1) FAIL("rank 0 never said go");
    float x[4] = {1, 2, 3, 4};
    plait_tensor_t tx;
    plait_tensor_1d(&tx, x, 4, PLAIT_FLOAT32);
    plait_handle_t *h = NULL;
    int rel;
    for (int i = 0; i < 2; i++) {
      EXPECT_OK(plait_allreduce_async("held", &tx, &tx, PLAIT_OP_SUM, NULL, &h));
      EXPECT_WR(plait_wait_release(h, -1, &rel), PLAIT_SUCCESS, rel, 1, "");
    }
  }
  if (polled(rank) || mismatched(rank)) return 1;
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(wait_release, held_finished_failed_and_bad_arguments, .timeout = 60) {
  pipe_arg_t p;
  cr_assert_eq(pipe(p.go), 0);
  plait_test_job_t job = {.nranks = 2, .timeout_s = 40};
  cr_expect_eq(plait_test_run_ranks(&job, rank_main, &p), 0);
  close(p.go[0]);
  close(p.go[1]);
}
