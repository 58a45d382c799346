/*
 * Operations that the ranks do not agree on, across real ranks on loopback
 * (coordinator and gloo transport):
 *
 *  - mismatches (shape, dtype, op, root, prescale, postscale, group,
 *    operation kind, group sizes, three different values, allgather's
 *    trailing dimensions, one bad member of a fused batch): every rank's
 *    handle fails with PLAIT_ERR_MISMATCH naming the tensor, each value and
 *    the ranks that sent it; the callback comes once; the job goes on;
 *  - an operation other than allreduce/allgather while a rank has joined;
 *  - stalls: the warning names the tensor and the missing rank; with
 *    PLAIT_STALL_ABORT_S the operation fails with PLAIT_ERR_STALLED.
 *
 * Lost ranks, shutdown and threads: test_failures.c. Observed messages are
 * printed ("[test rank N] ...").
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "failure_helpers.h"

TestSuite(mismatch, .init = clean_plait_env);

/* ------------------------------------------------------------------------ */
/* Mismatches: 3 ranks, rank 1 differs                                       */
/* ------------------------------------------------------------------------ */

typedef enum { MM_SHAPE, MM_DTYPE, MM_OP, MM_ROOT, MM_PRESCALE, MM_POSTSCALE, MM_GROUP, MM_KIND } mm_t;

static const struct {
  const char *label, *field; /* the field as the message names it */
  const char *common, *odd;  /* the value ranks 0, 2 sent, and rank 1 */
} mm[] = {
    {"shape", "shape", "[4]", "[5]"},
    {"dtype", "dtype", "float32", "int32"},
    {"op", "op", "sum", "max"},
    {"root", "root", "0", "2"},
    {"prescale", "prescale", "2", "0.5"},
    {"postscale", "postscale", "2", "0.5"},
    {"group", "group", "w (2 members)", "none"},
    {"operation kind", "operation", "allreduce", "broadcast"},
};
#define N_MM ((int)(sizeof mm / sizeof mm[0]))

/* Submits this rank's version of 'w' (and, for the group kind, 'w_b'). */
static plait_result_t submit_mismatch(int rank, mm_t k, float *x, int32_t *ix,
                                      plait_handle_t **h, plait_handle_t **h2) {
  int odd = rank == 1;
  plait_tensor_t t = f32(x, odd && k == MM_SHAPE ? 5 : 4);
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.callback = count_cb;
  if (k == MM_DTYPE && odd) plait_tensor_1d(&t, ix, 4, PLAIT_INT32);
  if (k == MM_PRESCALE) o.prescale_factor = odd ? 0.5 : 2;
  if (k == MM_POSTSCALE) o.postscale_factor = odd ? 0.5 : 2;
  plait_op_t op = k == MM_OP && odd ? PLAIT_OP_MAX : PLAIT_OP_SUM;
  if (k == MM_ROOT) return plait_broadcast_async("w", &t, odd ? 2 : 0, &o, h);
  if (k == MM_KIND && odd) return plait_broadcast_async("w", &t, 0, &o, h);
  if (k == MM_GROUP) {
    plait_tensor_t t2 = f32(x + 4, 4);
    if (!odd) {
      const char *names[2] = {"w", "w_b"};
      plait_tensor_t ts[2] = {t, t2};
      return plait_grouped_allreduce_async(2, names, ts, ts, op, &o, h);
    }
    plait_result_t rc = plait_allreduce_async("w", &t, &t, op, &o, h);
    return rc ? rc : plait_allreduce_async("w_b", &t2, &t2, op, &o, h2);
  }
  return plait_allreduce_async("w", &t, &t, op, &o, h);
}

/* The message of a mismatch: tensor, field, both values and who sent them. */
static int check_mismatch_message(int rank, mm_t k, const char *tensor) {
  const char *msg = plait_last_error();
  char quoted[16];
  snprintf(quoted, sizeof quoted, "'%s'", tensor);
  /* each value in the part of the message about its ranks (up to ';') */
  char a[256] = "", b[256] = "";
  const char *pa = strstr(msg, "ranks 0, 2 sent"), *pb = strstr(msg, "rank 1 sent");
  if (pa) snprintf(a, sizeof a, "%.*s", (int)strcspn(pa + 15, ";"), pa + 15);
  if (pb) snprintf(b, sizeof b, "%.*s", (int)strcspn(pb + 11, ";"), pb + 11);
  if (!strstr(msg, quoted) || !strstr(msg, mm[k].field) || !pa || !pb ||
      !strstr(a, mm[k].common) || !strstr(b, mm[k].odd))
    FAIL("%s mismatch: message should name %s, '%s', and say ranks 0, 2 sent %s, rank 1 sent "
         "%s: \"%s\"", mm[k].label, quoted, mm[k].field, mm[k].common, mm[k].odd, msg);
  return 0;
}

static int mismatches(int rank, int n, void *arg) {
  (void)arg;
  EXPECT_OK(plait_init());
  for (int k = 0; k < N_MM; k++) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t ix[4] = {1, 2, 3, 4};
    plait_handle_t *h = NULL, *h2 = NULL;
    EXPECT_OK(submit_mismatch(rank, (mm_t)k, x, ix, &h, &h2));
    plait_result_t rc = plait_wait(h, 20);
    EXPECT_ERR(rc, PLAIT_ERR_MISMATCH, "mismatched");
    /* a group fails as a whole: ranks 0, 2 may see either member's message */
    const char *tensor = k == MM_GROUP && rank != 1 && strstr(plait_last_error(), "'w_b'") ? "w_b" : "w";
    if (check_mismatch_message(rank, (mm_t)k, tensor)) return 1;
    if (rank == 0) plait_test_say(rank, "%s mismatch: \"%s\"", mm[k].label, plait_last_error());
    plait_release(h);
    int calls = k == MM_GROUP && rank == 1 ? 2 : 1; /* two handles there */
    if (!await_flag(&callbacks, calls, 5) || callback_rc != PLAIT_ERR_MISMATCH)
      FAIL("%s mismatch: callback %d calls, last %s", mm[k].label, atomic_load(&callbacks),
           plait_result_name(callback_rc));
    if (h2) {
      EXPECT_ERR(plait_wait(h2, 20), PLAIT_ERR_MISMATCH, "'w_b'", "group", "rank 1 sent none");
      plait_release(h2);
    }
    if (atomic_exchange(&callbacks, 0) != calls) FAIL("%s: too many callbacks", mm[k].label);
    /* the job goes on: the same name, right this time, on every rank */
    float y[4] = {(float)rank + 1, 1, 1, 1};
    EXPECT_OK(allreduce_wait("w", y, 4, 20));
    if (y[0] != n * (n + 1) / 2 || y[3] != n) FAIL("after the %s mismatch: %g %g", mm[k].label, y[0], y[3]);
  }
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(mismatch, mismatch_every_kind_names_tensor_values_and_ranks, .timeout = 60) {
  plait_test_job_t job = {.nranks = 3, .timeout_s = 45};
  cr_assert_eq(plait_test_run_ranks(&job, mismatches, NULL), 0);
}

/* Groups of different sizes: rank `big` submits [g, g_b, g_c], the other
 * [g, g_b]. Both handles must fail (a group fails as a whole), not wait for
 * 'g_c', which the other rank never submits. */
static int group_sizes(int rank, int n, void *arg) {
  (void)n;
  int big = *(int *)arg;
  EXPECT_OK(plait_init());
  float x[12] = {0};
  const char *names[3] = {"g", "g_b", "g_c"};
  plait_tensor_t ts[3] = {f32(x, 4), f32(x + 4, 4), f32(x + 8, 4)};
  plait_handle_t *h = NULL;
  EXPECT_OK(plait_grouped_allreduce_async(rank == big ? 3 : 2, names, ts, ts, PLAIT_OP_SUM, NULL, &h));
  double t0 = now();
  plait_result_t rc = plait_wait(h, 5);
  plait_test_say(rank, "group of %d vs %d after %.2f s: %s: \"%s\"", rank == big ? 3 : 2,
                 rank == big ? 2 : 3, now() - t0, plait_result_name(rc), plait_last_error());
  EXPECT_ERR(rc, PLAIT_ERR_MISMATCH, "group", "'g", "(2 members)", "(3 members)");
  plait_release(h);
  float y[4] = {1, 1, 1, 1};
  EXPECT_OK(allreduce_wait("g_after", y, 4, 10));
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(mismatch, mismatch_group_sizes_rank1_bigger, .timeout = 60) {
  int big = 1;
  plait_test_job_t job = {.nranks = 2, .timeout_s = 20};
  cr_expect_eq(plait_test_run_ranks(&job, group_sizes, &big), 0);
}

Test(mismatch, mismatch_group_sizes_rank0_bigger, .timeout = 60) {
  int big = 0;
  plait_test_job_t job = {.nranks = 2, .timeout_s = 20};
  cr_expect_eq(plait_test_run_ranks(&job, group_sizes, &big), 0);
}

/* Three ranks, three values: each group of ranks is listed. */
static int three_values(int rank, int n, void *arg) {
  (void)n, (void)arg;
  EXPECT_OK(plait_init());
  float x[6] = {0};
  plait_handle_t *h = NULL;
  EXPECT_OK(allreduce("w", x, 4 + rank, PLAIT_OP_SUM, NULL, &h));
  EXPECT_ERR(plait_wait(h, 10), PLAIT_ERR_MISMATCH, "'w'", "rank 0 sent [4]", "rank 1 sent [5]",
             "rank 2 sent [6]");
  if (rank == 0) plait_test_say(rank, "three shapes: \"%s\"", plait_last_error());
  plait_release(h);
  /* allgather: only the dimensions after the first must agree */
  plait_tensor_t t;
  plait_tensor_1d(&t, x, 6, PLAIT_FLOAT32);
  t.ndim = 2, t.shape[0] = 2, t.shape[1] = rank == 1 ? 3 : 2;
  EXPECT_OK(plait_allgather_async("ag", &t, NULL, &h));
  EXPECT_ERR(plait_wait(h, 10), PLAIT_ERR_MISMATCH, "'ag'", "after the first dimension",
             "ranks 0, 2 sent [2]", "rank 1 sent [3]");
  if (rank == 0) plait_test_say(rank, "allgather: \"%s\"", plait_last_error());
  plait_release(h);
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(mismatch, mismatch_three_values_and_allgather_trailing_shape, .timeout = 60) {
  plait_test_job_t job = {.nranks = 3, .timeout_s = 30};
  cr_expect_eq(plait_test_run_ranks(&job, three_values, NULL), 0);
}

/* A batch of small tensors (fused) with one bad member: only it fails. */
static int bad_member_of_a_batch(int rank, int n, void *arg) {
  (void)arg;
  EXPECT_OK(plait_init());
  for (int round = 0; round < 3; round++) { /* the later rounds go by cache */
    enum { T = 10 };
    float x[T][9];
    plait_handle_t *h[T];
    for (int i = 0; i < T; i++) {
      char name[16];
      snprintf(name, sizeof name, "f%d", i);
      for (int e = 0; e < 9; e++) x[i][e] = (float)rank + 1;
      EXPECT_OK(allreduce(name, x[i], i == 5 && rank == 1 && round != 1 ? 9 : 8, PLAIT_OP_SUM,
                          NULL, &h[i]));
    }
    for (int i = 0; i < T; i++) {
      plait_result_t rc = plait_wait(h[i], 10);
      if (i == 5 && round != 1) {
        EXPECT_ERR(rc, PLAIT_ERR_MISMATCH, "'f5'", "ranks 0, 2 sent [8]", "rank 1 sent [9]");
      } else {
        if (rc) FAIL("round %d: 'f%d' failed with its neighbour: %s: %s", round, i,
                     plait_result_name(rc), plait_last_error());
        if (x[i][0] != n * (n + 1) / 2 || x[i][7] != x[i][0] || x[i][8] != rank + 1)
          FAIL("round %d: 'f%d' gave %g %g %g", round, i, x[i][0], x[i][7], x[i][8]);
      }
      plait_release(h[i]);
    }
  }
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(mismatch, mismatch_fails_only_the_bad_member_of_a_fused_batch, .timeout = 60) {
  plait_test_job_t job = {.nranks = 3, .timeout_s = 30};
  cr_expect_eq(plait_test_run_ranks(&job, bad_member_of_a_batch, NULL), 0);
}

/* Rank 1 has joined: rank 0's broadcast (submitted after the join reached
 * rank 0) must fail naming rank 1; its allreduce runs with rank 1 standing in. */
static int broadcast_after_join(int rank, int n, void *arg) {
  (void)n, (void)arg;
  EXPECT_OK(plait_init());
  plait_handle_t *j = NULL, *h = NULL;
  float x[2] = {5, 6};
  if (rank == 1) {
    EXPECT_OK(plait_join_async(NULL, &j));
  } else {
    usleep(300000); /* rank 1's join has reached rank 0 */
    plait_tensor_t t = f32(x, 2);
    EXPECT_OK(plait_broadcast_async("b", &t, 0, NULL, &h));
    plait_result_t rc = plait_wait(h, 5);
    plait_test_say(rank, "broadcast after rank 1 joined: %s: \"%s\"", plait_result_name(rc),
                   plait_last_error());
    if (rc == PLAIT_SUCCESS || rc == PLAIT_ERR_TIMEOUT || !strstr(plait_last_error(), "'b'") ||
        !strstr(plait_last_error(), "rank 1") || !strstr(plait_last_error(), "join"))
      FAIL("expected an error naming 'b' and the joined rank 1");
    plait_release(h);
    EXPECT_OK(allreduce_wait("a", x, 2, 5));
    if (x[0] != 5 || x[1] != 6) FAIL("allreduce with rank 1 joined gave %g %g", x[0], x[1]);
    EXPECT_OK(plait_join_async(NULL, &j));
  }
  EXPECT_OK(plait_wait(j, 10));
  int last = -1;
  EXPECT_OK(plait_handle_join_rank(j, &last));
  if (last != 0) FAIL("last rank to join: %d, expected 0", last);
  plait_release(j);
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(mismatch, broadcast_while_a_rank_has_joined_fails_naming_it, .timeout = 60) {
  plait_test_job_t job = {.nranks = 2, .timeout_s = 30};
  cr_expect_eq(plait_test_run_ranks(&job, broadcast_after_join, NULL), 0);
}

/* ------------------------------------------------------------------------ */
/* Stalls                                                                    */
/* ------------------------------------------------------------------------ */

/* Rank 1 submits 'late' 2.5 s after rank 0; PLAIT_STALL_WARN_S=1. */
static int stall_warning(int rank, int n, void *arg) {
  (void)n, (void)arg;
  char path[] = "/tmp/plait_stall_XXXXXX";
  int saved = -1, fd = -1;
  if (rank == 0) { /* capture this rank's stderr */
    fflush(stderr);
    saved = dup(2);
    fd = mkstemp(path);
    if (saved < 0 || fd < 0 || dup2(fd, 2) < 0) FAIL("cannot redirect stderr");
  }
  EXPECT_OK(plait_init());
  if (rank == 1) usleep(2500000);
  float x[3] = {1, 2, 3};
  plait_result_t rc = allreduce_wait("late", x, 3, 20);
  const char *why = plait_last_error();
  if (rank == 1) {
    EXPECT_OK(rc);
    EXPECT_OK(plait_shutdown());
    return 0;
  }
  char captured[8192] = "";
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  ssize_t got = pread(fd, captured, sizeof captured - 1, 0);
  captured[got > 0 ? got : 0] = '\0';
  close(fd);
  unlink(path);
  if (rc != PLAIT_SUCCESS) FAIL("'late' failed: %s: %s", plait_result_name(rc), why);
  if (x[0] != 2) FAIL("'late' gave %g", x[0]);
  if (!strstr(captured, "'late'") || !strstr(captured, "missing: rank 1"))
    FAIL("no stall warning naming 'late' and \"missing: rank 1\" on stderr: \"%s\"", captured);
  char *line = strstr(captured, "[plait"), *end = line ? strchr(line, '\n') : NULL;
  if (end) *end = '\0';
  plait_test_say(rank, "stall warning: %s", line ? line : captured);
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(mismatch, stall_warning_names_tensor_and_missing_rank, .timeout = 60) {
  const char *env[] = {"PLAIT_STALL_WARN_S=1", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 30, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, stall_warning, NULL), 0);
}

/* Rank 1 never submits 'lonely'; PLAIT_STALL_ABORT_S=1. Rank 1 submits
 * 'after' only once 'lonely' has failed (else 'after' would stall too). */
static int stall_abort(int rank, int n, void *arg) {
  shared_t *sh = arg;
  EXPECT_OK(plait_init());
  float x[2] = {1, 1};
  if (rank == 0) {
    plait_handle_t *h = NULL;
    double t0 = now();
    EXPECT_OK(allreduce("lonely", x, 2, PLAIT_OP_SUM, NULL, &h));
    plait_result_t rc = plait_wait(h, 20);
    double took = now() - t0;
    EXPECT_ERR(rc, PLAIT_ERR_STALLED, "'lonely'", "rank 1", "PLAIT_STALL_ABORT_S");
    plait_test_say(rank, "stall abort after %.2f s: \"%s\"", took, plait_last_error());
    if (took < 0.9 || took > 3.5) FAIL("PLAIT_STALL_ABORT_S=1 fired after %.2f s", took);
    plait_release(h);
    /* the name is free again */
    EXPECT_OK(allreduce("lonely", x, 2, PLAIT_OP_SUM, NULL, &h));
    EXPECT_OK(plait_release(h)); /* completes in the background, with a stall */
    atomic_store(&sh->flag[0], 1);
  } else if (!await_flag(&sh->flag[0], 1, 20)) {
    FAIL("rank 0 never saw 'lonely' fail");
  }
  /* the job goes on */
  float y[2] = {1, 2};
  EXPECT_OK(allreduce_wait("after", y, 2, 20));
  if (y[0] != n || y[1] != 2 * n) FAIL("'after' gave %g %g", y[0], y[1]);
  plait_shutdown(); /* rank 0's second 'lonely' may still be pending */
  return 0;
}

Test(mismatch, stall_abort_fails_the_operation_and_job_goes_on, .timeout = 60) {
  const char *env[] = {"PLAIT_STALL_ABORT_S=1", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 30, .env = env};
  shared_t *sh = shared_new();
  cr_expect_eq(plait_test_run_ranks(&job, stall_abort, sh), 0);
  munmap(sh, sizeof *sh);
}
