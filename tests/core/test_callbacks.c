/* plait_wait inside a completion callback: only the coordinator thread can
 * finish operations, and callbacks run on it, so waiting there for an
 * unfinished operation would hang forever. plait refuses instead. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "plait/plait.h"
#include "ranks.h"

static plait_handle_t *other;
static plait_result_t seen = PLAIT_SUCCESS;
static char seen_msg[512];

static void cb(plait_handle_t *h, plait_result_t rc, void *user) {
  (void)h, (void)rc, (void)user;
  seen = plait_wait(other, -1); /* 'b' cannot be finished yet: rank 1 has not sent it */
  snprintf(seen_msg, sizeof seen_msg, "%s", plait_last_error());
}

static int body(int rank, int n, void *arg) {
  (void)n, (void)arg;
  if (plait_init()) return 1;
  float a = 1, b = 2;
  plait_tensor_t ta, tb;
  plait_tensor_1d(&ta, &a, 1, PLAIT_FLOAT32);
  plait_tensor_1d(&tb, &b, 1, PLAIT_FLOAT32);
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  plait_handle_t *h;
  if (rank == 0) {
    o.callback = cb;
    if (plait_allreduce_async("b", &tb, &tb, PLAIT_OP_SUM, NULL, &other)) return 1;
  }
  if (plait_allreduce_async("a", &ta, &ta, PLAIT_OP_SUM, &o, &h) || plait_wait(h, 20)) return 1;
  if (rank == 1 && plait_allreduce_async("b", &tb, &tb, PLAIT_OP_SUM, NULL, &other)) return 1;
  if (plait_wait(other, 20) || b != 4) return 1; /* and 'b' itself still completes */
  plait_release(h);
  plait_release(other);
  if (rank == 0 && (seen != PLAIT_ERR_INVALID_ARGUMENT || !strstr(seen_msg, "wait forever"))) {
    plait_test_say(rank, "plait_wait in a callback gave %s: %s", plait_result_name(seen), seen_msg);
    return 1;
  }
  return plait_shutdown() ? 1 : 0;
}

Test(callbacks, wait_inside_a_callback_is_refused_not_a_hang, .timeout = 60) {
  plait_test_job_t job = {.nranks = 2, .timeout_s = 40};
  cr_assert_eq(plait_test_run_ranks(&job, body, NULL), 0);
}
