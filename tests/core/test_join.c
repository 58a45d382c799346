/*
 * Join against Horovod 0.28.1 (measured with horovodrun, docs/horovod-
 * comparison.md "Join"): while a rank has joined, the other ranks' allreduce
 * runs with the joined rank's identity, allgather with no rows from it, and
 * barrier completes with the joined rank taking part (Horovod's joined rank
 * crashes there); broadcast (whoever the root), alltoall and reducescatter
 * fail on the ranks that submitted them, naming the joined rank, and the job
 * goes on: the join completes and later operations run on every rank.
 * Each case both before the join arrives (the operation waits, then the join
 * settles it) and after.
 */
#include <criterion/criterion.h>

#include "ops_util.h"

static const char *const no_env[] = {NULL};

typedef struct {
  int submit_first; /* 1: rank 0 submits before the others join */
} join_case_t;

/* Rank 0 runs everything; the others join at once, or after a barrier-free
 * pause long enough for rank 0's submissions to be pending first. */
static int body(int rank, int n, void *arg) {
  const join_case_t *c = arg;
  plait_handle_t *h;
  if (rank != 0) {
    if (c->submit_first) ops_sleep(0.5); /* rank 0's operations are pending by then */
    OK(plait_join_async(NULL, &h));
    OK(plait_wait(h, 60));
    int last = -2;
    OK(plait_handle_join_rank(h, &last));
    CHECK(last == 0, "join: last joined rank %d, expected 0", last);
    plait_release(h);
  } else {
    float x[4] = {1, 2, 3, 4}, ag[4] = {5, 6, 7, 8}, gathered[64];
    plait_tensor_t t, tg, out;
    plait_handle_t *hs[6];
    OK(plait_tensor_1d(&t, x, 4, PLAIT_FLOAT32));
    OK(plait_tensor_1d(&tg, ag, 4, PLAIT_FLOAT32));
    tg.ndim = 2, tg.shape[0] = 2, tg.shape[1] = 2;
    OK(plait_allreduce_async("j/avg", &t, &t, PLAIT_OP_AVERAGE, NULL, &hs[0]));
    OK(plait_allgather_async("j/gather", &tg, NULL, &hs[1]));
    OK(plait_barrier_async(NULL, &hs[2]));
    float b[4] = {9, 9, 9, 9}, b1[4] = {9, 9, 9, 9}, rs[4] = {1, 1, 1, 1};
    plait_tensor_t tb, tb1, trs;
    OK(plait_tensor_1d(&tb, b, 4, PLAIT_FLOAT32));
    OK(plait_tensor_1d(&tb1, b1, 4, PLAIT_FLOAT32));
    OK(plait_tensor_1d(&trs, rs, 4, PLAIT_FLOAT32));
    OK(plait_broadcast_async("j/bcast-root0", &tb, 0, NULL, &hs[3]));
    OK(plait_broadcast_async("j/bcast-root-joined", &tb1, n - 1, NULL, &hs[4]));
    OK(plait_reducescatter_async("j/reducescatter", &trs, PLAIT_OP_SUM, NULL, &hs[5]));
    /* allreduce: average divides by every rank, the joined ones giving 0 */
    OK(plait_wait(hs[0], 60));
    for (int i = 0; i < 4; i++)
      CHECK(x[i] == (float)(i + 1) / (float)n, "average with %d joined: x[%d] = %g", n - 1, i,
            x[i]);
    /* allgather: only rank 0's rows */
    OK(plait_wait(hs[1], 60));
    OK(plait_handle_output(hs[1], &out));
    CHECK(out.ndim == 2 && out.shape[0] == 2 && out.shape[1] == 2,
          "allgather with the others joined: %d dims, [%lld, %lld]", out.ndim,
          (long long)out.shape[0], (long long)out.shape[1]);
    memcpy(gathered, out.data, 4 * sizeof(float));
    CHECK(gathered[0] == 5 && gathered[3] == 8, "allgather rows %g..%g", gathered[0],
          gathered[3]);
    /* barrier: completes, the joined ranks taking part */
    plait_result_t rc = plait_wait(hs[2], 60);
    CHECK(rc == PLAIT_SUCCESS, "barrier with the others joined: %s: %s", plait_result_name(rc),
          plait_last_error());
    /* broadcast (either root) and reducescatter: fail, naming the joined ranks */
    static const char *what[3] = {"broadcast 'j/bcast-root0'", "broadcast 'j/bcast-root-joined'",
                                  "reducescatter 'j/reducescatter'"};
    for (int k = 0; k < 3; k++) {
      rc = plait_wait(hs[3 + k], 60);
      CHECK(rc == PLAIT_ERR_MISMATCH, "%s with the others joined: %s (%s)", what[k],
            plait_result_name(rc), plait_last_error());
      CHECK(strstr(plait_last_error(), what[k]) && strstr(plait_last_error(), "joined") &&
                strstr(plait_last_error(), "not supported with join"),
            "message: %s", plait_last_error());
    }
    CHECK(b[0] == 9 && b1[0] == 9, "a failed broadcast changed its buffer");
    for (int k = 0; k < 6; k++) plait_release(hs[k]);
    OK(plait_join_async(NULL, &h));
    OK(plait_wait(h, 60));
    plait_release(h);
  }
  /* the job goes on: a broadcast on every rank works again */
  float y[2] = {(float)rank, (float)rank};
  plait_tensor_t ty;
  OK(plait_tensor_1d(&ty, y, 2, PLAIT_FLOAT32));
  OK(plait_broadcast_async("j/after", &ty, n - 1, NULL, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  CHECK(y[0] == (float)(n - 1), "broadcast after the join: %g", y[0]);
  /* and a barrier of every rank: the joined ranks counted the barrier they
   * took part in, so every rank names this one alike */
  OK(plait_barrier_async(NULL, &h));
  plait_result_t brc = plait_wait(h, 20);
  CHECK(brc == PLAIT_SUCCESS, "barrier of every rank after the join: %s: %s",
        plait_result_name(brc), plait_last_error());
  plait_release(h);
  return 0;
}

static void run(int nranks, int submit_first) {
  OPS_REQUIRE_GLOO();
  join_case_t c = {submit_first};
  cr_assert_eq(ops_run(nranks, no_env, 90, body, &c), 0, "a rank failed (see above)");
}

Test(join, ops_after_the_others_joined_2ranks, .timeout = 120) { run(2, 0); }
Test(join, ops_pending_when_the_others_join_2ranks, .timeout = 120) { run(2, 1); }
Test(join, ops_after_the_others_joined_3ranks, .timeout = 120) { run(3, 0); }
Test(join, ops_pending_when_the_others_join_3ranks, .timeout = 120) { run(3, 1); }
